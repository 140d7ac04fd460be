"""Celery tasks of retention: thin wrappers, idempotent, taking ids."""

from __future__ import annotations

from celery import shared_task

from retention.cycle import execute
from retention.models import RetentionCycle


@shared_task
def run_retention_cycle(cycle_id: int | None = None) -> int:
    """Run a queued cycle (from the API or console), or a new one when beat calls with no id."""
    if cycle_id is None:
        cycle = RetentionCycle.objects.create(trigger="beat")
    else:
        cycle = RetentionCycle.objects.select_related("stream__scope", "requested_by").get(pk=cycle_id)
        if cycle.state != "queued":
            return cycle.pk  # already run: a redelivered task does nothing twice
    execute(cycle)
    return cycle.pk
