"""A stream's retention lock: held by a cycle from reading the stream's retention set to writing
it back, and by a manual truncation (`stream_lock`). One Redis lock per stream, by
`store.locks` (compare-and-set, dead holders on this machine taken over)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass

from domain.errors import FieldError
from store import locks as redis_locks
from streams.models import Stream

LOCK_TIMEOUT_S = 600  # a lock outlives a dead holder elsewhere by at most this long


def _lock_key(stream: Stream) -> str:
    """Named by the stream's `storage_key`, never by its id (see `Stream.storage_key`)."""
    return f"cbr:retention:{stream.storage_key}"


@dataclass
class Locks:
    """Retention locks this cycle took for a batch: `held` are the streams whose lock it holds
    (another cycle holds the rest)."""

    held: list[Stream]
    token: str

    @classmethod
    def take(cls, streams: list[Stream], task: str | None = None) -> Locks:
        """One script call for the whole batch; a lock left by a dead cycle on this machine, or by
        an earlier attempt of the same `task` anywhere (a retried Spark task), is taken over rather
        than waited out, so a killed cycle's work is finished at once (docs/design/retention.md)."""
        token = redis_locks.holder_token(task)
        got = redis_locks.take([_lock_key(s) for s in streams], token, LOCK_TIMEOUT_S)
        return cls([s for s, ok in zip(streams, got) if ok], token)

    def release(self) -> None:
        """Compare-and-delete: a lock that expired and was taken by another cycle stays."""
        redis_locks.release([_lock_key(s) for s in self.held], self.token)
        self.held = []

    def hand_over(self, keep: set[int]) -> list[str]:
        """Release the locks of every stream but those whose ids are in `keep`, and return the
        keys of those kept: an executor that planned their truncations hands them to the driver,
        which applies the plans under them and releases them (`release_handed`)."""
        redis_locks.release([_lock_key(s) for s in self.held if s.pk not in keep], self.token)
        kept = [_lock_key(s) for s in self.held if s.pk in keep]
        self.held = []
        return kept


def release_handed(keys: list[str], token: str) -> None:
    """Release locks an executor handed over (`Locks.hand_over`), where `token` still holds them."""
    redis_locks.release(keys, token)


@contextmanager
def stream_lock(stream: Stream, wait_s: float):
    """The stream's retention lock, for a change to its head or retention set outside a cycle (a
    manual truncation). A cycle holds it from reading a stream's retention set to writing it back,
    so the two never undo each other's records; a cycle that still holds it after `wait_s` makes
    this a 409 `retention_in_progress` (retry shortly)."""
    deadline = time.monotonic() + wait_s
    while not (locks := Locks.take([stream])).held:
        if time.monotonic() >= deadline:
            raise FieldError(
                "stream_cut",
                "a retention cycle is working on this stream; try again in a few seconds",
                "retention_in_progress",
            )
        time.sleep(0.05)
    try:
        yield
    finally:
        locks.release()
