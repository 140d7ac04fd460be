"""The console's pages that create, change and delete streams and reader groups, as the roles
allow (the same rules as the API: `access.rules`). Deleting asks for a confirmation page first.
Thin: the forms turn input into arguments, the services do the work (the same the API calls)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse

from access.permissions import console_access
from access.rules import Action, TargetKind
from console.manage_forms import GroupForm, StreamForm, StreamSettingsForm
from domain.errors import FieldError
from groups import reader_groups
from groups.consuming.dead_letters import dead_letter_name
from groups.models import ReaderGroup, RetentionType
from retention import services as retention_services
from retention.models import RetentionPolicy
from streams import deletion, services
from streams.found import found_or_404
from streams.models import Stream


def _stream_names() -> list[str]:
    return [s.full_name for s in Stream.objects.select_related("scope").order_by("scope__name", "name")]


@console_access({"GET": Action.MANAGE_STREAMS, "POST": Action.MANAGE_STREAMS})
def create_stream(request):
    form = StreamForm(request.POST or None, initial={"scope": request.GET.get("scope", "")})
    if request.method == "POST" and form.is_valid():
        try:
            stream = retention_services.do_create_stream(**form.create_args(), user=request.user)
        except FieldError as exc:
            form.show(exc)
        else:
            messages.success(request, f"Stream {stream.full_name} created.")
            return redirect("console:stream", scope=stream.scope.name, name=stream.name)
    return render(request, "console/streams/form.html", {"form": form})


@console_access({"GET": Action.MANAGE_STREAMS, "POST": Action.MANAGE_STREAMS}, TargetKind.STREAM)
def stream_settings(request, scope, name):
    stream = found_or_404(
        Stream.objects.select_related("scope"), f"stream {scope}/{name}", scope__name=scope, name=name
    )
    form = StreamSettingsForm(request.POST or None, initial=StreamSettingsForm.initial_for(stream))
    if request.method == "POST" and form.is_valid():
        changes = form.changes(stream)
        if changes:
            services.do_update_stream(stream, changes)
            messages.success(request, f"Saved: {', '.join(sorted(changes))}.")
        return redirect("console:stream", scope=scope, name=name)
    return render(request, "console/streams/settings.html", {"form": form, "stream": stream})


@console_access({"GET": Action.DELETE_STREAM, "POST": Action.DELETE_STREAM}, TargetKind.STREAM)
def delete_stream(request, scope, name):
    stream = found_or_404(
        Stream.objects.select_related("scope"), f"stream {scope}/{name}", scope__name=scope, name=name
    )
    refused = ""
    if request.method == "POST":
        if request.POST.get("confirm") == stream.full_name:
            deletion.do_delete_stream(stream)
            messages.success(request, f"Stream {scope}/{name} deleted, with its events.")
            return redirect("console:streams")
        refused = f"Type {stream.full_name} to confirm."
    groups = ReaderGroup.objects.filter(subscription__stream=stream).select_related("scope").distinct()
    dead_letters = Stream.objects.filter(scope=stream.scope, name=dead_letter_name(stream)).first()
    kept = (
        []
        if dead_letters is None
        else [f"its dead letters, stream {scope}/{dead_letters.name}, stay: delete it on its own page"]
    )
    return render(
        request,
        "console/shared/confirm_delete.html",
        {
            "what": f"stream {stream.full_name}",
            "name": stream.full_name,
            "refused": refused,
            "consequences": [
                f"its {stream.segment_count} segment{'s' * (stream.segment_count != 1)} and every event in them are deleted",
                *[f"reader group {g} stops reading it (its other streams go on)" for g in groups],
                *kept,
            ],
            "cancel": reverse("console:stream", kwargs={"scope": scope, "name": name}),
        },
    )


@console_access({"GET": Action.TRUNCATE, "POST": Action.TRUNCATE}, TargetKind.STREAM)
def purge_stream(request, scope, name):
    """Purge (admins): a manual truncation at the tail or at a time, after the stream's name is
    typed, recorded in the history as any manual truncation."""
    stream = found_or_404(
        Stream.objects.select_related("scope"), f"stream {scope}/{name}", scope__name=scope, name=name
    )
    refused, to, at = "", request.POST.get("to", "tail"), request.POST.get("time", "")
    if request.method == "POST":
        if request.POST.get("confirm") != stream.full_name:
            refused = f"Type {stream.full_name} to confirm."
        else:
            try:
                target = "tail" if to == "tail" else {"time": f"{at}Z" if at else ""}
                cut = retention_services.purge_cut(stream, target)
                record = retention_services.do_truncate(
                    stream, cut, rule="manual", trigger="console", user=request.user
                )
            except FieldError as exc:
                refused = f"{exc.field}: {exc.message}"
            else:
                if record is None:
                    messages.info(request, f"Nothing to purge: {stream.full_name} holds nothing before that point.")
                else:
                    messages.success(
                        request,
                        f"Purged {stream.full_name}: {record.reclaimed_bytes} bytes reclaimed (see the truncation history).",
                    )
                return redirect("console:stream", scope=scope, name=name)
    return render(
        request,
        "console/streams/purge.html",
        {"stream": stream, "refused": refused, "to": to, "at": at},
        status=400 if refused else 200,
    )


@console_access({"GET": Action.MANAGE_READER_GROUPS, "POST": Action.MANAGE_READER_GROUPS})
def create_group(request):
    initial = {"streams": request.GET.getlist("stream"), "scope": request.GET.get("scope", "")}
    # made from a consumption-based stream's page: a subscriber by default, or the newcomer's
    # first group would hold nothing back
    holding = _consumption_based(initial["streams"])
    if holding:
        initial["retention_type"] = RetentionType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT
    form = GroupForm(request.POST or None, stream_names=_stream_names(), initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            streams = reader_groups.check_streams(data["streams"])
            group = reader_groups.do_create_reader_group(
                scope=data["scope"], name=data["name"], streams=streams, start=form.start_position(), **form.settings()
            )
        except FieldError as exc:
            form.show(exc)
        else:
            messages.success(request, f"Reader group {group} created.")
            return redirect("console:reader-group", scope=group.scope.name, name=group.name)
    return render(request, "console/groups/form.html", {"form": form, "holding": holding})


def _consumption_based(names: list[str]) -> list[str]:
    """Those of the streams named (`scope/name`) whose retention policy is consumption-based."""
    wanted = [tuple(n.split("/", 1)) for n in names if n.count("/") == 1]
    if not wanted:
        return []
    found = RetentionPolicy.objects.filter(consumption_based=True, stream__name__in=[n for _, n in wanted])
    held = {(p.stream.scope.name, p.stream.name) for p in found.select_related("stream__scope")}
    return [f"{scope}/{name}" for scope, name in wanted if (scope, name) in held]


def _group(scope: str, name: str) -> ReaderGroup:
    return found_or_404(
        ReaderGroup.objects.select_related("scope"), f"reader group {scope}/{name}", scope__name=scope, name=name
    )


@console_access({"GET": Action.MANAGE_READER_GROUPS, "POST": Action.MANAGE_READER_GROUPS}, TargetKind.READER_GROUP)
def group_settings(request, scope, name):
    group = _group(scope, name)
    form = GroupForm(
        request.POST or None, stream_names=_stream_names(), editing=True, initial=GroupForm.initial_for(group)
    )
    if request.method == "POST" and form.is_valid():
        try:
            streams = reader_groups.check_streams(form.cleaned_data["streams"])
            reader_groups.do_update_reader_group(group, form.settings(), streams=streams)
        except FieldError as exc:
            form.show(exc)
        else:
            messages.success(request, f"Reader group {group} saved (generation {group.generation}).")
            return redirect("console:reader-group", scope=scope, name=name)
    return render(request, "console/groups/form.html", {"form": form, "group": group})


@console_access({"GET": Action.MANAGE_READER_GROUPS, "POST": Action.MANAGE_READER_GROUPS}, TargetKind.READER_GROUP)
def delete_group(request, scope, name):
    group = _group(scope, name)
    refused = ""
    if request.method == "POST":
        if request.POST.get("confirm") == str(group):
            reader_groups.do_delete_reader_group(group)
            messages.success(request, f"Reader group {scope}/{name} deleted.")
            return redirect("console:reader-groups")
        refused = f"Type {group} to confirm."
    holds = group.retention_type != "NONE"
    return render(
        request,
        "console/shared/confirm_delete.html",
        {
            "what": f"reader group {group}",
            "name": str(group),
            "refused": refused,
            "consequences": [
                "its consumers' deliveries in hand can no longer be acknowledged; its positions and checkpoints go",
                *(
                    ["its hold on retention ends: the next cycle may release what it had not acknowledged"]
                    if holds
                    else []
                ),
            ],
            "cancel": reverse("console:reader-group", kwargs={"scope": scope, "name": name}),
        },
    )
