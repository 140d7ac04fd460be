"""Deleting a stream. It sits above everything that refers to a stream (reader groups, their
trackers, the delayed index), so that none of those imports back."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from streams.consuming import forget_trackers
from streams.delaying.buckets import forget_index
from streams.logs import stream_log
from streams.models import Stream
from streams.reader_groups import note_stream_deleted


def do_delete_stream(stream: Stream) -> None:
    """The stream goes with its files and every piece of its Redis state: its delayed index and
    its reader groups' acknowledgement state on it. Each group that read it records the removal
    (`reader_groups.note_stream_deleted`)."""

    log = stream_log(stream)
    forget = forget_index(stream)
    with transaction.atomic():
        trackers = note_stream_deleted(stream, timezone.now())
        stream.delete()
        transaction.on_commit(log.delete)
        transaction.on_commit(forget)
        transaction.on_commit(lambda: forget_trackers(trackers))
