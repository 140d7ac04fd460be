"""The console's stream pages (htmx). Thin: read through querysets and services, write through
services; a view decides once, at its end, whether to send a page or a fragment."""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.utils import timezone

from access.permissions import can, console_access
from access.rules import Action, TargetKind
from compaction.models import CompactionRun
from compaction.runs import CompactionBusy
from compaction.tasks import queue_run
from console import charts
from console.forms import PolicyForm, ScopeDefaultsForm
from console.htmx import htmx_partial
from domain.compaction import max_may_outrun_compaction
from domain.errors import FieldError
from domain.positions import finished
from retention import scope_defaults, set_store
from retention import services as retention_services
from retention.explain import explain
from retention.models import RetentionCycle, TruncationRecord
from retention.projections import consumption_states, subscriber_states
from retention.tasks import queue_stream_cycle
from store.health import readiness
from streams import consuming, logs, reader_groups, sampling
from streams.consuming import checkpoint_interval_s
from streams.models import ReaderGroup, Scope, Stream
from streams.projections.delayed import delayed_state
from streams.projections.groups import group_overview, group_summaries, totals_by_stream
from streams.projections.positions import group_state

SORTS = {
    "name": ("scope__name", "name"),
    "-name": ("-scope__name", "-name"),
    "size": ("held_bytes", "scope__name", "name"),
    "-size": ("-held_bytes", "scope__name", "name"),
    "events": ("held_events", "scope__name", "name"),
    "-events": ("-held_events", "scope__name", "name"),
    "created": ("created_at",),
    "-created": ("-created_at",),
}


VIEW = {"GET": Action.VIEW}
STREAM = TargetKind.STREAM


@console_access(VIEW)
def dashboard(request):
    streams = Stream.objects.with_sizes()
    totals = {"streams": 0, "bytes": 0, "events": 0}
    for s in streams:
        totals["streams"] += 1
        totals["bytes"] += s.held_bytes or 0
        totals["events"] += s.held_events or 0
    recent = TruncationRecord.objects.select_related("stream__scope", "triggered_by")[:10]
    consumption = consumption_states()
    context = {
        "cbr_streams": len(consumption),
        "without_subscriber": [c.stream for c in consumption if not c.has_active_subscriber],
        "running_cycles": RetentionCycle.objects.filter(state__in=["queued", "running"])[:5],
        "totals": totals,
        "reclaimed": TruncationRecord.objects.reclaimed_bytes(),
        "truncation_count": TruncationRecord.objects.count(),
        "recent": recent,
        "largest": streams.order_by("-held_bytes").select_related("scope")[:5],
        "health": readiness(),
    }
    return render(request, "streams/dashboard.html", context)


@console_access(VIEW)
def stream_list(request):
    query = request.GET.get("q", "").strip()
    sort = request.GET.get("sort", "name")
    if sort not in SORTS:
        sort = "name"
    qs = Stream.objects.with_sizes().search(query).select_related("scope", "retention_policy")
    page = Paginator(qs.order_by(*SORTS[sort]), 20).get_page(request.GET.get("page"))
    context = {"page": page, "q": query, "sort": sort}
    if htmx_partial(request):
        return render(request, "streams/list.html#stream-table", context)
    return render(request, "streams/list.html", context)


def _stream(scope: str, name: str) -> Stream:
    return get_object_or_404(
        Stream.objects.select_related("scope__defaults", "retention_policy", "delayed", "compacted_view"),
        scope__name=scope,
        name=name,
    )


def _policy_context(request, stream, form=None, editing=False) -> dict:
    policy = getattr(stream, "retention_policy", None)
    return {
        "stream": stream,
        "policy": policy,
        "form": form or PolicyForm(initial=PolicyForm.initial_for(policy)),
        "editing": editing,
        "can_edit": can(request, Action.MANAGE_STREAMS),
    }


def _detail_context(request, stream, **policy_kwargs) -> dict:
    state = logs.refresh_segments(stream)
    truncations = list(stream.truncations.select_related("triggered_by")[:50])
    return {
        **_policy_context(request, stream, **policy_kwargs),
        "state": state,
        "segments": stream.segments.all(),
        "truncations": truncations,
        "subscribers": _with_lag(stream, subscriber_states(stream, state.head_cut, state.tail_cut)),
        "retention_set": set_store.entries(stream),
        "chart": charts.draw(charts.held_series(truncations, timezone.now(), state.size_bytes)),
        "over_time": _over_time(stream, truncations),
        "sample_interval": settings.CBR_SAMPLE_INTERVAL,
        "last_cycle": RetentionCycle.objects.filter(stream=stream).first(),
        "why": explain(stream),
        **_delayed_context(stream),
        **_compaction_context(request, stream),
    }


def _over_time(stream, truncations) -> dict:
    """The stream's sampled series (`streams.sampling`) with its truncations in the window, as the
    page's charts take them (static/cbr/charts.js)."""
    data = sampling.series(stream).as_json()
    start = data["times"][0] if data["times"] else None
    data["truncations"] = [
        {
            "t": t.created_at.timestamp(),
            "held": None if t.tail_size is None else t.tail_size - t.after_size,
            "rule": t.rule,
            "reclaimed": t.reclaimed_bytes,
        }
        for t in truncations
        if start is not None and t.created_at.timestamp() >= start
    ]
    # the last samples as a table, for reading without JavaScript
    data["recent"] = [
        {
            "at": datetime.fromtimestamp(t, tz=UTC),
            "held": held,
            "rate": rate,
            "lags": {g: v["lag"][i] for g, v in data["groups"].items()},
        }
        for i, (t, held, rate) in enumerate(zip(data["times"], data["held_bytes"], data["publish_rate"], strict=True))
    ][-10:][::-1]
    data["chart_data"] = {k: data[k] for k in ("times", "held_bytes", "publish_rate", "groups", "truncations")}
    return data


def _with_lag(stream, subscribers) -> list[tuple]:
    """Each subscriber with its group's lag on this stream (from its floors: what the reader-group
    pages show), beside what its acknowledgement cut holds back."""
    return [(s, totals_by_stream(group_state(s.group)).get(stream.full_name)) for s in subscribers]


def _delayed_context(stream) -> dict:
    """The delayed-delivery panel, for a stream that ever had a delayed event (it has a
    DelayedIndex row from then on)."""
    if getattr(stream, "delayed", None) is None:
        return {"delayed": None}
    return {"stream": stream, "delayed": delayed_state(stream), "delayed_ops": stream.delayed_ops.all()[:20]}


def _compaction_context(request, stream, notice: str = "", warn: bool = False) -> dict:
    """The compaction panel, for a compacted stream: its current generation, the last 20 runs
    (the newest one first, its phase while it runs) and bytes before/after of the last 20
    successful ones, oldest first, for the chart."""
    if not stream.is_compacted:
        return {"compaction": None}
    runs = list(stream.compaction_runs.all()[:20])
    charted = list(stream.compaction_runs.filter(state=CompactionRun.State.SUCCEEDED)[:20])[::-1]
    interval_s = settings.CBR_COMPACTION_INTERVAL
    policy = getattr(stream, "retention_policy", None)
    return {
        "stream": stream,
        "compaction": {
            "view": getattr(stream, "compacted_view", None),
            "runs": runs,
            "last_run": runs[0] if runs else None,
            "charted": charted,
            "tallest": max((max(r.bytes_before, r.bytes_after) for r in charted), default=0),
            "interval_s": interval_s,
            "max_outruns": max_may_outrun_compaction(interval_s, policy),
            "retention_max_s": policy.max_value if policy is not None and policy.limit_type == "time" else None,
            "notice": notice,
            "notice_warns": warn,
        },
        "can_compact": can(request, Action.RUN_JOBS),
    }


@console_access(VIEW)
def stream_detail(request, scope, name):
    stream = _stream(scope, name)
    return render(request, "streams/detail.html", _detail_context(request, stream))


@console_access(VIEW)
def delayed_panel(request, scope, name):
    """The delayed-delivery panel alone: the stream page polls it every 3 s."""
    stream = _stream(scope, name)
    return render(request, "streams/detail.html#delayed-panel", _delayed_context(stream))


@console_access(VIEW)
def compaction_panel(request, scope, name):
    """The compaction panel alone: the stream page polls it every 3 s (a running run's phase)."""
    stream = _stream(scope, name)
    return render(request, "streams/_compaction.html", _compaction_context(request, stream))


@console_access({"POST": Action.RUN_JOBS}, STREAM)
def compact_now(request, scope, name):
    """Queue a compaction of this stream for the worker; answer with the panel, which says
    whether it was queued or one was already queued or running."""
    stream = _stream(scope, name)
    if not stream.is_compacted:
        return HttpResponseBadRequest(f"{stream.full_name} is not compacted (cleanup_policy {stream.cleanup_policy})")
    sealed = ""
    if request.POST.get("seal") == "1":  # everything published so far goes into this run
        chunks = logs.seal_active_chunks(stream)
        sealed = f"Sealed {len(chunks)} active chunk{pluralize(len(chunks))}. " if chunks else "Nothing to seal. "
    try:
        run = queue_run(stream, "console")
    except CompactionBusy:
        context = _compaction_context(
            request,
            stream,
            warn=True,
            notice=f"A compaction of {stream.full_name} is already queued or running: this one was not queued.",
        )
    else:
        notice = sealed + (
            f"Compaction #{run.pk} queued."
            if run.state == CompactionRun.State.QUEUED
            else f"Compaction #{run.pk} could not be queued: {run.error}"
        )
        context = _compaction_context(request, stream, notice=notice, warn=run.state != CompactionRun.State.QUEUED)
    if htmx_partial(request):
        return render(request, "streams/_compaction.html", context)
    return redirect("console:stream", scope=scope, name=name)


@console_access({"GET": Action.VIEW, "POST": Action.MANAGE_STREAMS}, STREAM)
def policy_panel(request, scope, name):
    stream = _stream(scope, name)
    if request.method == "GET":
        editing = request.GET.get("edit") == "1" and can(request, Action.MANAGE_STREAMS)
        return render(
            request,
            "streams/detail.html#policy-panel",
            _policy_context(request, stream, editing=editing),
        )
    form = PolicyForm(request.POST)
    if form.is_valid():
        retention_services.do_set_policy(stream, form.cleaned_data["spec"], request.user)
        stream = _stream(scope, name)
        context = _policy_context(request, stream)
        context["saved"] = True
    else:
        context = _policy_context(request, stream, form=form, editing=True)
    if htmx_partial(request):
        return render(request, "streams/detail.html#policy-panel", context)
    if form.is_valid():
        return redirect("console:stream", scope=scope, name=name)
    return render(request, "streams/detail.html", _detail_context(request, stream, form=form, editing=True))


@console_access({"POST": Action.RUN_JOBS}, STREAM)
def run_retention_now(request, scope, name):
    """Queue a retention cycle for this stream; answer with a progress panel that polls."""
    stream = _stream(scope, name)
    if getattr(stream, "retention_policy", None) is None:
        return HttpResponseBadRequest("this stream has no retention policy")
    cycle = queue_stream_cycle(stream, "console", request.user)
    if htmx_partial(request):
        return render(request, "streams/_cycle.html", {"cycle": cycle, "stream": stream})
    return redirect("console:stream", scope=scope, name=name)


# -- reader groups -------------------------------------------------------------------------


@console_access(VIEW)
def reader_group_list(request):
    groups = ReaderGroup.objects.select_related("scope").prefetch_related("subscription_set__stream__scope")
    page = Paginator(groups, 25).get_page(request.GET.get("page"))
    context = {"page": page, "rows": group_summaries(page)}
    if htmx_partial(request):
        return render(request, "streams/reader_groups.html#group-table", context)
    return render(request, "streams/reader_groups.html", context)


@console_access(VIEW)
def reader_group_detail(request, scope, name):
    group = get_object_or_404(ReaderGroup.objects.select_related("scope"), scope__name=scope, name=name)
    context = {"group": group, "overview": group_overview(group)}
    if htmx_partial(request):
        return render(request, "streams/reader_group.html#group-positions", context)
    context.update(_checkpoints_context(request, group))
    context.update(_seek_context(request, group))
    context["checkpoint_interval_s"] = checkpoint_interval_s(group)
    return render(request, "streams/reader_group.html", context)


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
    }


@console_access({"POST": Action.MANAGE_READER_GROUPS}, TargetKind.READER_GROUP)
def seek_reader_group(request, scope, name):
    """The group page's Seek: to the head, the tail or a publish time (the form's UTC time)."""
    group = get_object_or_404(ReaderGroup.objects.select_related("scope"), scope__name=scope, name=name)
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
            return render(request, "streams/reader_group.html#seek-panel", _seek_context(request, group, notice, True))
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
        "consumers": consuming.consumers_seen(group),
    }


def _checkpoints_answer(request, group: ReaderGroup, notice: str, warn: bool = False):
    if htmx_partial(request):
        context = _checkpoints_context(request, group, notice, warn)
        return render(request, "streams/reader_group.html#checkpoints-panel", context)
    messages.add_message(request, messages.WARNING if warn else messages.SUCCESS, notice)
    return redirect("console:reader-group", scope=group.scope.name, name=group.name)


@console_access({"POST": Action.CONSUME}, TargetKind.READER_GROUP)
def checkpoint_now(request, scope, name):
    """Record the group's floors now under a name (an AUTOMATIC group publishes them as its cuts)."""
    group = get_object_or_404(ReaderGroup.objects.select_related("scope"), scope__name=scope, name=name)
    try:
        cp_name = consuming.check_checkpoint_name(request.POST.get("name", "").strip())
        consuming.do_checkpoint(group, cp_name, persist=request.POST.get("persist") == "on")
    except FieldError as exc:
        return _checkpoints_answer(request, group, f"No checkpoint: {exc.field} {exc.message}.", warn=True)
    return _checkpoints_answer(request, group, f"Checkpoint {cp_name} recorded.")


@console_access({"POST": Action.CONSUME}, TargetKind.READER_GROUP)
def release_checkpoint(request, scope, name, checkpoint):
    """A MANUAL group releases at a persisted checkpoint: its cuts become the acknowledgement cuts."""
    group = get_object_or_404(ReaderGroup.objects.select_related("scope"), scope__name=scope, name=name)
    try:
        consuming.do_release_checkpoint(group, checkpoint)
    except FieldError as exc:
        return _checkpoints_answer(request, group, f"Not released: {exc.field} {exc.message}.", warn=True)
    return _checkpoints_answer(request, group, f"Released at {checkpoint}: the acknowledgement cuts moved there.")


@console_access({"POST": Action.CONSUME}, TargetKind.READER_GROUP)
def delete_checkpoint(request, scope, name, checkpoint):
    """Delete one of the group's checkpoints; answer with the checkpoints panel (htmx) or go back
    to the group's page."""
    group = get_object_or_404(ReaderGroup.objects.select_related("scope"), scope__name=scope, name=name)
    try:
        consuming.do_delete_checkpoint(group, checkpoint)
    except FieldError:
        return _checkpoints_answer(request, group, f"There is no checkpoint {checkpoint} (already deleted?).", True)
    return _checkpoints_answer(request, group, f"Checkpoint {checkpoint} deleted.")


def _scope_context(request, scope: Scope, form: ScopeDefaultsForm | None = None, notice: str = "", warns=False) -> dict:
    defaults = scope_defaults.scope_defaults(scope)
    return {
        "scope": scope,
        "defaults": defaults,
        "has_defaults": any(v is not None for v in defaults.values()),
        "form": form or ScopeDefaultsForm(initial=ScopeDefaultsForm.initial_for(defaults)),
        "policy_fields": ("limit_type", *ScopeDefaultsForm.POLICY_FIELDS),
        "compaction_fields": ("cleanup_policy", *ScopeDefaultsForm.COMPACTION_FIELDS),
        "can_edit": can(request, Action.MANAGE_STREAMS),
        "streams": Stream.objects.filter(scope=scope).select_related("scope__defaults"),
        "notice": notice,
        "warns": warns,
    }


def _scope_answer(request, context: dict):
    if htmx_partial(request):
        return render(request, "streams/scope_defaults.html#defaults-panel", context)
    return render(request, "streams/scope_defaults.html", context)


@console_access({"GET": Action.VIEW, "POST": Action.MANAGE_STREAMS})
def scope_defaults_page(request, scope):
    """A scope's defaults for its streams: shown, and edited by operators (a blank field has no
    default); the streams of the scope with what each takes from it."""
    found = get_object_or_404(Scope, name=scope)
    if request.method == "GET":
        return render(request, "streams/scope_defaults.html", _scope_context(request, found))
    form = ScopeDefaultsForm(request.POST)
    if not form.is_valid():
        return _scope_answer(request, _scope_context(request, found, form, "Not saved: see the fields.", True))
    try:
        scope_defaults.do_set_scope_defaults(found.name, form.body(), request.user)
    except FieldError as exc:
        form.show(exc)
        return _scope_answer(request, _scope_context(request, found, form, "Not saved: see the fields.", True))
    if not htmx_partial(request):
        return redirect("console:scope-defaults", scope=scope)
    return _scope_answer(
        request, _scope_context(request, found, notice="Defaults saved: the streams that take them follow now.")
    )


@console_access({"POST": Action.MANAGE_STREAMS})
def clear_scope_defaults(request, scope):
    found = get_object_or_404(Scope, name=scope)
    scope_defaults.do_clear_scope_defaults(found, request.user)
    if not htmx_partial(request):
        return redirect("console:scope-defaults", scope=scope)
    return _scope_answer(request, _scope_context(request, found, notice="Defaults removed."))
