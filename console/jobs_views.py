"""The console's jobs: retention cycles and compactions in one list (state, progress, duration,
streams, truncations, bytes reclaimed, errors, who or what triggered them), refreshed while one
runs, and a cycle's own page."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.paginator import Paginator
from django.shortcuts import render

from access.permissions import console_access
from access.rules import Action
from compaction.models import CompactionRun
from console.htmx import htmx_partial
from retention.models import RetentionCycle
from streams.found import found_or_404

KINDS = ("all", "cycles", "compactions")
STATES = ("queued", "running", "done", "failed")
RUNNING = ("queued", "running")


@dataclass(frozen=True)
class Job:
    kind: str  # "cycle" | "compaction"
    run: RetentionCycle | CompactionRun

    @property
    def at(self) -> datetime:
        return self.run.created_at

    @property
    def running(self) -> bool:
        return self.run.state in RUNNING


def _jobs(kind: str, state: str) -> list[Job]:
    """The newest 500 of each kind asked for, merged newest first."""
    jobs: list[Job] = []
    if kind in ("all", "cycles"):
        cycles = RetentionCycle.objects.select_related("stream__scope", "requested_by").order_by("-created_at")
        cycles = cycles.filter(state=state) if state else cycles
        jobs += [Job("cycle", c) for c in cycles[:500]]
    if kind in ("all", "compactions"):
        runs = CompactionRun.objects.select_related("stream__scope").order_by("-created_at")
        runs = runs.filter(state=state) if state else runs
        jobs += [Job("compaction", r) for r in runs[:500]]
    return sorted(jobs, key=lambda j: j.at, reverse=True)


@console_access({"GET": Action.VIEW})
def jobs(request):
    kind = request.GET.get("kind", "all")
    kind = kind if kind in KINDS else "all"
    state = request.GET.get("state", "")
    state = state if state in STATES else ""
    page = Paginator(_jobs(kind, state), 50).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "kind": kind,
        "state": state,
        "kinds": KINDS,
        "states": STATES,
        "running": any(j.running for j in page),
        "retention_interval": settings.CBR_RETENTION_INTERVAL,
    }
    if htmx_partial(request):
        return render(request, "console/jobs/list.html#job-table", context)
    return render(request, "console/jobs/list.html", context)


@console_access({"GET": Action.VIEW})
def cycle(request, pk):
    """A cycle: its progress fragment for htmx polls (the stream page's and this page's), its
    own page otherwise. Once a polled cycle is over, the poll asks the page to reload, so the stream
    page shows the truncation it made."""
    run = found_or_404(
        RetentionCycle.objects.select_related("stream__scope", "requested_by"), f"retention cycle {pk}", pk=pk
    )
    context = {"cycle": run, "stream": run.stream}
    if htmx_partial(request):
        response = render(request, "console/jobs/_cycle.html", context)
        if run.state not in RUNNING and request.GET.get("polled") == "1":
            response["HX-Refresh"] = "true"
        return response
    return render(request, "console/jobs/cycle.html", context)
