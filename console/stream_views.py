"""The console's stream pages (htmx): the list, a stream's page and the panels it polls or swaps
(retention policy, segments and their scaling policy, delayed delivery, compaction), and its Run
retention now and Compact now.
Thin: read through querysets, projections and services, write through services, and decide
once, at the end, whether to send a page or a fragment. Creating, changing and deleting a stream
are manage_views'; its events are browse_views'. It must never write a row or a file itself."""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.core.paginator import Paginator
from django.http import HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.utils import timezone

from access.permissions import can, console_access
from access.rules import Action, TargetKind
from compaction.models import CompactionRun
from compaction.runs import CompactionBusy
from compaction.tasks import queue_run
from console import charts
from console.forms import PolicyForm, ScaleForm, ScalingPolicyForm
from console.htmx import htmx_partial
from console.segments import HEIGHT, WIDTH, epoch_ticks, key_space_boxes, scaling_rows, scaling_summary
from domain.compaction import max_may_outrun_compaction
from domain.errors import FieldError
from groups import sampling
from groups.projections.lag import group_state
from groups.projections.overview import totals_by_stream
from retention import services as retention_services
from retention import set_store
from retention.explain import explain
from retention.models import RetentionCycle
from retention.projections import subscriber_states
from retention.tasks import queue_stream_cycle
from streams import logs, services, tiering
from streams import scaling as scaling_services
from streams.delaying.projection import delayed_state
from streams.found import found_or_404
from streams.models import Stream
from streams.tags import tagged

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
def stream_list(request):
    query = request.GET.get("q", "").strip()
    sort = request.GET.get("sort", "name")
    if sort not in SORTS:
        sort = "name"
    tag = request.GET.get("tag", "").strip()
    qs = Stream.objects.with_sizes().search(query).select_related("scope", "retention_policy")
    tag_error = ""
    try:
        qs = tagged(qs, [tag] if tag else [])
    except FieldError as exc:
        tag_error, qs = exc.message, qs.none()
    page = Paginator(qs.order_by(*SORTS[sort]), 20).get_page(request.GET.get("page"))
    context = {"page": page, "q": query, "sort": sort, "tag": tag, "tag_error": tag_error}
    if htmx_partial(request):
        return render(request, "console/streams/list.html#stream-table", context)
    return render(request, "console/streams/list.html", context)


def _stream(scope: str, name: str) -> Stream:
    return found_or_404(
        Stream.objects.select_related("scope__defaults", "retention_policy", "delayed", "compacted_view"),
        f"stream {scope}/{name}",
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


def _segments_context(
    request, stream, form=None, notice: str = "", warn: bool = False, policy_form=None, policy_notice: str = ""
) -> dict:
    """The Segments panel: the key space over epochs, the segments held, the scale form, the
    scaling policy (in words, and its form) and the scaling history."""
    layout = stream.layout
    rows = {row.segment_id: row for row in stream.segments.all()}
    return {
        "stream": stream,
        "layout": layout,
        "boxes": key_space_boxes(layout),
        "ticks": epoch_ticks(layout),
        "picture": {"width": WIDTH, "height": HEIGHT},
        "segment_rows": [(layout[sid], layout.is_sealed(sid), rows.get(sid)) for sid in layout.held_ids],
        "scalings": list(stream.scalings.all()[:20]),
        "scale_form": form or ScaleForm(layout=layout, initial={"epoch": stream.epoch}),
        "can_scale": can(request, Action.MANAGE_STREAMS),
        "scale_notice": notice,
        "scale_notice_warns": warn,
        "scaling_summary": scaling_summary(stream.scaling_policy),
        "scaling_rows": scaling_rows(stream.scaling_policy),
        "scaling_policy_form": policy_form
        or ScalingPolicyForm(initial=ScalingPolicyForm.initial_for(stream.scaling_policy)),
        "scaling_policy_notice": policy_notice,
    }


def _detail_context(request, stream, **policy_kwargs) -> dict:
    state = logs.refresh_segments(stream)
    truncations = list(stream.truncations.select_related("triggered_by")[:50])
    return {
        **_policy_context(request, stream, **policy_kwargs),
        "state": state,
        "head_cut": state.shown(stream.layout, state.head_cut),
        "tail_cut": state.shown(stream.layout, state.tail_cut),
        **_segments_context(request, stream),
        "truncations": truncations,
        "subscribers": _with_lag(stream, subscriber_states(stream, state.head_cut, state.tail_cut)),
        "retention_set": set_store.entries(stream),
        "chart": charts.draw(charts.held_series(truncations, timezone.now(), state.size_bytes)),
        "over_time": _over_time(stream, truncations),
        "sample_interval": settings.CBR_SAMPLE_INTERVAL,
        "last_cycle": RetentionCycle.objects.filter(stream=stream).first(),
        "why": explain(stream),
        # long-term storage, where one is configured: (bytes, chunks) copied there
        "tier": tiering.tier_usage([stream.pk]).get(stream.pk, (0, 0)) if tiering.tier() is not None else None,
        **_delayed_context(stream),
        **_compaction_context(request, stream),
    }


def _over_time(stream, truncations) -> dict:
    """The stream's sampled series (`groups.sampling`) with its truncations in the window, as the
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
    # a size policy's limits, drawn as dashed lines on the held chart (with their legend)
    policy = getattr(stream, "retention_policy", None)
    if policy is not None and policy.limit_type == "size":
        data["chart_data"]["limits"] = {"min": policy.min_value, "max": policy.max_value}
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
    return render(request, "console/streams/detail.html", _detail_context(request, stream))


@console_access(VIEW)
def delayed_panel(request, scope, name):
    """The delayed-delivery panel alone: the stream page polls it every 3 s."""
    stream = _stream(scope, name)
    return render(request, "console/streams/detail.html#delayed-panel", _delayed_context(stream))


@console_access(VIEW)
def compaction_panel(request, scope, name):
    """The compaction panel alone: the stream page polls it every 3 s (a running run's phase)."""
    stream = _stream(scope, name)
    return render(request, "console/streams/_compaction.html", _compaction_context(request, stream))


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
        return render(request, "console/streams/_compaction.html", context)
    return redirect("console:stream", scope=scope, name=name)


@console_access({"GET": Action.VIEW, "POST": Action.MANAGE_STREAMS}, STREAM)
def policy_panel(request, scope, name):
    stream = _stream(scope, name)
    if request.method == "GET":
        editing = request.GET.get("edit") == "1" and can(request, Action.MANAGE_STREAMS)
        return render(
            request,
            "console/streams/detail.html#policy-panel",
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
        return render(request, "console/streams/detail.html#policy-panel", context)
    if form.is_valid():
        return redirect("console:stream", scope=scope, name=name)
    return render(request, "console/streams/detail.html", _detail_context(request, stream, form=form, editing=True))


@console_access({"POST": Action.RUN_JOBS}, STREAM)
def run_retention_now(request, scope, name):
    """Queue a retention cycle for this stream; answer with a progress panel that polls."""
    stream = _stream(scope, name)
    if getattr(stream, "retention_policy", None) is None:
        return HttpResponseBadRequest("this stream has no retention policy")
    cycle = queue_stream_cycle(stream, "console", request.user)
    if htmx_partial(request):
        return render(request, "console/jobs/_cycle.html", {"cycle": cycle, "stream": stream})
    return redirect("console:stream", scope=scope, name=name)


@console_access({"GET": Action.VIEW, "POST": Action.MANAGE_STREAMS}, STREAM)
def segments_panel(request, scope, name):
    """The Segments panel alone, and its scale form (operators): a split or a merge, one epoch."""
    stream = _stream(scope, name)
    if request.method == "GET":
        return render(request, "console/streams/detail.html#segments-panel", _segments_context(request, stream))
    form = ScaleForm(request.POST, layout=stream.layout)
    context = None
    if form.is_valid():
        try:
            seal, ranges = form.scale()
            scaling = scaling_services.do_scale(
                stream, seal=seal, new_ranges=ranges, epoch=form.cleaned_data["epoch"], by=request.user.get_username()
            )
        except FieldError as exc:
            notice = (
                f"{stream.full_name} scaled since this page was shown (now epoch {exc.details.get('epoch')}): "
                "look at its segments again"
                if exc.code == "epoch_mismatch"
                else exc.message
            )
            context = _segments_context(request, _stream(scope, name), notice=notice, warn=True)
        else:
            made = ", ".join(c["id"] for c in scaling.created)
            context = _segments_context(
                request,
                _stream(scope, name),
                notice=f"Epoch {scaling.epoch}: sealed {', '.join(scaling.sealed)}, made {made}.",
            )
    else:
        context = _segments_context(request, stream, form=form)
    if htmx_partial(request):
        return render(request, "console/streams/detail.html#segments-panel", context)
    return redirect("console:stream", scope=scope, name=name)


@console_access({"POST": Action.MANAGE_STREAMS}, STREAM)
def scaling_policy(request, scope, name):
    """The Segments panel's scaling policy form (operators): saved by the service the API's
    `PUT …/scaling-policy/` calls, whose refusal goes beside the field it names and changes
    nothing. Answers with the panel."""
    stream = _stream(scope, name)
    form = ScalingPolicyForm(request.POST)
    saved = False
    if form.is_valid():
        try:
            services.do_set_scaling_policy(stream, form.body())
            saved = True
        except FieldError as exc:
            form.show(exc)
    if saved:
        notice = "Scaling policy saved: the next auto-scaling evaluation (every minute) applies it."
        context = _segments_context(request, _stream(scope, name), policy_notice=notice)
    else:
        context = _segments_context(request, stream, policy_form=form)
    if htmx_partial(request):
        return render(request, "console/streams/detail.html#segments-panel", context)
    if saved:
        return redirect("console:stream", scope=scope, name=name)
    return render(request, "console/streams/detail.html", {**_detail_context(request, stream), **context})
