"""Celery tasks of retention (thin wrappers, idempotent, taking ids) and what queues them."""

from __future__ import annotations

import functools

from celery import shared_task
from django.db import transaction
from django.dispatch import receiver

from retention.cycle.lifecycle import execute
from retention.models import RetentionCycle
from streams.jobs import queue_job
from streams.models import Stream
from streams.signals import holds_released


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


def queue_stream_cycle(stream: Stream, trigger: str, user=None) -> RetentionCycle:
    """Queue a retention cycle for one stream (console "run now", or a full stream whose
    subscribers moved). If the broker is down the cycle is recorded as failed, with why
    (`streams.jobs.queue_job`)."""
    cycle = RetentionCycle.objects.create(
        trigger=trigger,
        requested_by=user if user is not None and user.is_authenticated else None,
        stream=stream,
    )
    queue_job(cycle, run_retention_cycle)
    return cycle


def recheck_full_streams(streams: list[Stream]) -> None:
    """A subscriber moved its cut or went away: each full stream (`reject_publish`) gets a cycle
    at once, after the change commits, instead of refusing publishes until the next beat."""
    for stream in streams:
        if stream.full_since is not None and hasattr(stream, "retention_policy"):
            transaction.on_commit(functools.partial(queue_stream_cycle, stream, "api"))


@receiver(holds_released)
def _recheck_when_holds_release(sender, streams: list[Stream], **kwargs) -> None:
    recheck_full_streams(streams)
