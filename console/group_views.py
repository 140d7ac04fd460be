"""The console's reader-group pages (htmx): the list, a group's page with its positions (polled),
and what its page does: seek, and record, release and delete checkpoints. Thin: read through
projections, write through groups.reader_groups and groups.consuming, and decide once, at the
end, whether to send a page or a fragment. Creating, changing and deleting a group are
manage_views'. It must never write a row itself."""

from __future__ import annotations

from urllib.parse import quote

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render

from access.permissions import can, console_access
from access.rules import Action, TargetKind
from console.htmx import htmx_partial
from domain.errors import FieldError
from domain.start_positions import finished
from groups import consuming, reader_groups
from groups.consuming import checkpoint_interval_s
from groups.models import ReaderGroup
from groups.projections.consumers import assignments, consumer_figures
from groups.projections.lag import group_state
from groups.projections.overview import group_overview, group_summaries
from streams.found import found_or_404
from streams.tags import tagged

VIEW = {"GET": Action.VIEW}


@console_access(VIEW)
def reader_group_list(request):
    groups = ReaderGroup.objects.select_related("scope").prefetch_related("subscription_set__stream__scope")
    tag = request.GET.get("tag", "").strip()
    tag_error = ""
    try:
        groups = tagged(groups, [tag] if tag else [])
    except FieldError as exc:
        tag_error, groups = exc.message, groups.none()
    page = Paginator(groups, 25).get_page(request.GET.get("page"))
    query = f"tag={quote(tag)}&" if tag else ""  # the pager's links keep the filter
    context = {"page": page, "rows": group_summaries(page), "tag": tag, "tag_error": tag_error, "query": query}
    if htmx_partial(request):
        return render(request, "console/groups/list.html#group-table", context)
    return render(request, "console/groups/list.html", context)


@console_access(VIEW)
def reader_group_detail(request, scope, name):
    group = found_or_404(
        ReaderGroup.objects.select_related("scope"), f"reader group {scope}/{name}", scope__name=scope, name=name
    )
    context = {"group": group, "overview": group_overview(group)}
    if htmx_partial(request):
        return render(request, "console/groups/detail.html#group-positions", context)
    context.update(_checkpoints_context(request, group))
    context.update(_seek_context(request, group))
    context["checkpoint_interval_s"] = checkpoint_interval_s(group)
    return render(request, "console/groups/detail.html", context)


def _seek_context(request, group: ReaderGroup, notice: str = "", warn: bool = False) -> dict:
    ends = group.end_stream_cuts or {}
    done = bool(ends) and all(
        finished({p.segment: max(p.floor, p.head) for p in group_state(group) if p.stream == name}, cut)
        for name, cut in ends.items()
    )
    return {
        "group": group,
        "can_manage": can(request, Action.MANAGE_READER_GROUPS),
        "seek_notice": notice,
        "seek_warns": warn,
        "finished": done,
        # a refused seek's form keeps what was chosen and typed
        "seek_to": request.POST.get("to", "head") if request.method == "POST" else "head",
        "seek_time": request.POST.get("time", "") if request.method == "POST" else "",
    }


@console_access({"POST": Action.MANAGE_READER_GROUPS}, TargetKind.READER_GROUP)
def seek_reader_group(request, scope, name):
    """The group page's Seek: to the head, the tail or a publish time (the form's UTC time)."""
    group = found_or_404(
        ReaderGroup.objects.select_related("scope"), f"reader group {scope}/{name}", scope__name=scope, name=name
    )
    body: dict = {}
    to = request.POST.get("to", "")
    if to == "time":
        body["time"] = request.POST.get("time", "") + ("Z" if request.POST.get("time") else "")
    else:
        body["position"] = to
    if request.POST.get("generation", "").isdigit():
        body["generation"] = int(request.POST["generation"])
    try:
        group = reader_groups.do_seek(group, body)
    except FieldError as exc:
        notice = f"Not moved: {exc.field} {exc.message}."
        if htmx_partial(request):
            return render(request, "console/groups/detail.html#seek-panel", _seek_context(request, group, notice, True))
        messages.warning(request, notice)
        return redirect("console:reader-group", scope=scope, name=name)
    messages.success(
        request, f"{group} moved to {body.get('position') or body['time']}: generation {group.generation}."
    )
    if htmx_partial(request):  # positions, cuts, generation and checkpoints all moved: the whole page again
        response = HttpResponse(status=204)
        response["HX-Refresh"] = "true"
        return response
    return redirect("console:reader-group", scope=scope, name=name)


def _checkpoints_context(request, group: ReaderGroup, notice: str = "", warn: bool = False) -> dict:
    return {
        "group": group,
        "checkpoints": group.checkpoints.all()[:10],
        "can_consume": can(request, Action.CONSUME),
        "can_release": group.retention_type == "MANUAL_RELEASE_AT_USER_STREAMCUT",
        "checkpoint_notice": notice,
        "checkpoint_warns": warn,
        "consumers": consumer_figures(group),
        "assignments": assignments(group),
    }


def _checkpoints_answer(request, group: ReaderGroup, notice: str, warn: bool = False):
    if htmx_partial(request):
        context = _checkpoints_context(request, group, notice, warn)
        return render(request, "console/groups/detail.html#checkpoints-panel", context)
    messages.add_message(request, messages.WARNING if warn else messages.SUCCESS, notice)
    return redirect("console:reader-group", scope=group.scope.name, name=group.name)


@console_access({"POST": Action.CONSUME}, TargetKind.READER_GROUP)
def checkpoint_now(request, scope, name):
    """Record the group's floors now under a name (an AUTOMATIC group publishes them as its cuts)."""
    group = found_or_404(
        ReaderGroup.objects.select_related("scope"), f"reader group {scope}/{name}", scope__name=scope, name=name
    )
    try:
        cp_name = consuming.check_checkpoint_name(request.POST.get("name", "").strip())
        consuming.do_checkpoint(group, cp_name, persist=request.POST.get("persist") == "on")
    except FieldError as exc:
        return _checkpoints_answer(request, group, f"No checkpoint: {exc.field} {exc.message}.", warn=True)
    return _checkpoints_answer(request, group, f"Checkpoint {cp_name} recorded.")


@console_access({"POST": Action.CONSUME}, TargetKind.READER_GROUP)
def release_checkpoint(request, scope, name, checkpoint):
    """A MANUAL group releases at a persisted checkpoint: its cuts become the acknowledgement cuts."""
    group = found_or_404(
        ReaderGroup.objects.select_related("scope"), f"reader group {scope}/{name}", scope__name=scope, name=name
    )
    try:
        consuming.do_release_checkpoint(group, checkpoint)
    except FieldError as exc:
        return _checkpoints_answer(request, group, f"Not released: {exc.field} {exc.message}.", warn=True)
    return _checkpoints_answer(request, group, f"Released at {checkpoint}: the acknowledgement cuts moved there.")


@console_access({"POST": Action.CONSUME}, TargetKind.READER_GROUP)
def delete_checkpoint(request, scope, name, checkpoint):
    """Delete one of the group's checkpoints; answer with the checkpoints panel (htmx) or go back
    to the group's page."""
    group = found_or_404(
        ReaderGroup.objects.select_related("scope"), f"reader group {scope}/{name}", scope__name=scope, name=name
    )
    try:
        consuming.do_delete_checkpoint(group, checkpoint)
    except FieldError:
        return _checkpoints_answer(request, group, f"There is no checkpoint {checkpoint} (already deleted?).", True)
    return _checkpoints_answer(request, group, f"Checkpoint {checkpoint} deleted.")
