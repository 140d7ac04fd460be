"""Celery tasks of the stream store: thin wrappers around services, idempotent, safe to retry."""

from __future__ import annotations

import logging

from celery import shared_task
from django.dispatch import receiver

from streams import autoscaling, logs, tiering
from streams.delaying import maintenance
from streams.models import Stream
from streams.signals import delayed_bucket_sealed

logger = logging.getLogger(__name__)


@shared_task
def seal_due_chunks() -> int:
    """Roll aged active chunks (so idle streams seal, and retention can delete whole chunks);
    how many were sealed."""
    return sum(logs.seal_due_chunks(s) for s in Stream.objects.all())


@shared_task
def refresh_segment_stats() -> int:
    streams = list(Stream.objects.all())
    for stream in streams:
        logs.refresh_segments(stream)
    return len(streams)


@shared_task
def autoscale() -> int:
    """Every stream's scaling policy evaluated (`streams.autoscaling`): how many scales it made."""
    return len(autoscaling.autoscale())


@shared_task
def offload() -> int:
    """Sealed files due for long-term storage copied there (`streams.tiering.offload_due`): how
    many objects were written."""
    try:
        return tiering.offload_due().objects
    finally:
        tiering.publish_counts()


@shared_task
def tier_sweep() -> int:
    """Objects in long-term storage that no row names and nothing needs, deleted
    (`streams.tiering.sweep`): how many."""
    try:
        return tiering.sweep()
    finally:
        tiering.publish_counts()


@shared_task
def offload_stream(stream_id: int) -> int:
    """One stream's sealed files copied to long-term storage now, whatever their age (`POST
    …/offload/`): how many objects were written."""
    stream = Stream.objects.filter(pk=stream_id).first()
    try:
        return 0 if stream is None else tiering.do_offload(stream, all_sealed=True).objects
    finally:
        tiering.publish_counts()


@shared_task
def delayed_maintenance() -> int:
    """Look after every stream's delayed index (streams.delaying.maintenance)."""
    return maintenance.maintain_all()


@shared_task
def maintain_delayed_index(stream_id: int) -> dict:
    """One stream's delayed index, at once (a publish sealed its mutable bucket)."""
    stream = Stream.objects.filter(pk=stream_id).first()
    return maintenance.maintain(stream) if stream is not None else {}


@receiver(delayed_bucket_sealed)
def queue_sealing(sender, stream: Stream, **kwargs) -> None:
    """A publish sealed the mutable delayed bucket: snapshot it now, not at the next beat."""
    try:
        maintain_delayed_index.delay(stream.pk)
    except Exception:  # the broker is down: beat's next round seals it
        logger.warning("could not queue the sealing of %s's delayed bucket", stream, exc_info=True)
