"""The console's dashboard, its home page: what the whole service holds and reclaimed, streams
that hold data for no one, running cycles, the largest streams, the latest truncations and the
service's health. Read only: it must never write, queue or change anything."""

from __future__ import annotations

from django.shortcuts import render

from access.permissions import console_access
from access.rules import Action
from ops.health import readiness
from retention.models import RetentionCycle, TruncationRecord
from retention.projections import consumption_states
from streams import tiering
from streams.models import Stream

VIEW = {"GET": Action.VIEW}


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
        "offload": tiering.offload_state(),
    }
    return render(request, "console/dashboard/dashboard.html", context)
