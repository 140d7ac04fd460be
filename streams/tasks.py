"""Celery tasks of the stream store: thin wrappers around services, idempotent, safe to retry."""

from __future__ import annotations

from celery import shared_task

from streams import consuming, services
from streams.delaying import maintenance
from streams.models import Stream


@shared_task
def seal_due_chunks() -> int:
    """Roll aged active chunks and give every sealed chunk its Parquet copy."""
    return sum(services.seal_due_chunks(s) for s in Stream.objects.all())


@shared_task
def refresh_segment_stats() -> int:
    streams = list(Stream.objects.all())
    for stream in streams:
        services.refresh_segments(stream)
    return len(streams)


@shared_task
def periodic_checkpoints() -> int:
    """Checkpoint AUTOMATIC reader groups whose `checkpoint_interval_s` has passed (their
    acknowledgement cuts follow)."""
    return consuming.periodic_checkpoints()


@shared_task
def delayed_maintenance() -> int:
    """Look after every stream's delayed index (streams.delaying.maintenance)."""
    return maintenance.maintain_all()


@shared_task
def maintain_delayed_index(stream_id: int) -> dict:
    """One stream's delayed index, at once (a publish sealed its mutable bucket)."""
    stream = Stream.objects.filter(pk=stream_id).first()
    return maintenance.maintain(stream) if stream is not None else {}
