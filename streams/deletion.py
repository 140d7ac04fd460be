"""Deleting a stream. It sits above everything of this app that refers to a stream (its log, the
delayed index); the reader groups, in the app above, hear of it through `stream_deleted`
(streams.signals), so that none of those imports back."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from streams.delaying.buckets import forget_index
from streams.logs import stream_log
from streams.models import Stream
from streams.signals import stream_deleted
from streams.tiering import forget_stream


def do_delete_stream(stream: Stream) -> None:
    """The stream goes with its files and every piece of its Redis state: its delayed index and
    its reader groups' acknowledgement state on it. Each group that read it records the removal
    (`stream_deleted`, received by `groups.reader_groups.forget_deleted_stream`)."""

    log = stream_log(stream)
    forget = forget_index(stream)
    with transaction.atomic():
        # after the commit: the files, then the delayed index, then what the receivers queue
        # (the groups' trackers), in that order
        transaction.on_commit(log.delete)
        transaction.on_commit(forget)
        forget_stream(stream)  # its objects in long-term storage, once this commits
        stream_deleted.send(sender=Stream, stream=stream, at=timezone.now())
        stream.delete()
