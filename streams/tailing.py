"""A plain read that waits (`GET …/events/?wait_ms=`, `cbr tail --follow`): no group, no lease;
it waits for a publish on the stream, woken as a group's read is (`streams.waking`), each such
read on its own (every one of them wants every event)."""

from __future__ import annotations

import time
import uuid

from store.store import StreamRecord
from streams import logs, waking
from streams.models import Stream


def read_events_waiting(
    stream: Stream,
    from_cut: dict[str, int],
    limit: int,
    wait_ms: int,
    park: bool = False,
    since: float | None = None,
) -> tuple[list[StreamRecord], dict[str, int], waking.Wait | None]:
    """`logs.read_events`, waiting up to `wait_ms` for the first event: (events, next cut, None),
    or with `park` ([], next cut, what to wait for) instead of waiting in this thread (a front
    that waits without one reads again when woken, `since` when it began to wait)."""
    deadline = time.monotonic() + wait_ms / 1000
    channels = (waking.stream_channel(stream.storage_key),)
    key = f"plain:{uuid.uuid4().hex}"  # a waiter of its own: every publish wakes it
    while True:
        seen = waking.listener().snapshot(channels) if wait_ms > 0 else None
        records, next_cut = logs.read_events(stream, from_cut, limit)
        left = deadline - time.monotonic()
        if records or left <= 0 or seen is None:
            return records, next_cut, None
        timeout = left if waking.listener().healthy else min(left, waking.FALLBACK_POLL_S)
        since = time.monotonic() if since is None else since
        if park:
            return [], next_cut, waking.Wait(channels, key, seen, timeout, deadline, since)
        waking.wait(channels, key, seen, timeout)
