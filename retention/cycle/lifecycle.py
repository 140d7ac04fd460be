"""A recorded cycle (`RetentionCycle`) run: its state and progress kept up to date, a heartbeat
while it runs, and the cycles whose process died marked failed."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from retention.cycle.gathering import streams_with_policy
from retention.cycle.outcomes import Report
from retention.cycle.running import choose_engine, run_cycle_summary
from retention.models import CycleState, RetentionCycle
from store import locks as redis_locks

HEARTBEAT_S = 30  # a running cycle says it is alive this often

DEAD_AFTER_S = 4 * HEARTBEAT_S  # a cycle silent this long died (its process on another machine)


def sweep_dead_cycles() -> int:
    """Mark failed the cycles left `running` by a process that died: one on this machine that no
    longer exists, or one elsewhere silent for `DEAD_AFTER_S`. Their truncations were recorded
    before the store was touched, and the next cycle finishes them (docs/design/retention.md); only their rows
    stay behind, and this ends them."""
    now = timezone.now()
    silent = now - timedelta(seconds=DEAD_AFTER_S)
    running = RetentionCycle.objects.filter(state=CycleState.RUNNING).only("id", "runner", "heartbeat_at", "started_at")
    dead = [
        c.pk
        for c in running
        if redis_locks.holder_is_dead(c.runner)
        or (not redis_locks.holder_is_here(c.runner) and (c.heartbeat_at or c.started_at or now) < silent)
    ]
    if not dead:
        return 0
    return RetentionCycle.objects.filter(pk__in=dead, state=CycleState.RUNNING).update(
        state=CycleState.FAILED,
        finished_at=now,
        error="its process died before the cycle ended; the next cycle finishes its truncations",
    )


@contextmanager
def heartbeat(cycle) -> Iterator[None]:
    """While the block runs, the cycle's row says every `HEARTBEAT_S` that it is alive (from a
    thread with a database connection of its own)."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(HEARTBEAT_S):
                try:
                    RetentionCycle.objects.filter(pk=cycle.pk).update(heartbeat_at=timezone.now())
                except Exception:  # the database away for a moment: the next beat tries again
                    continue
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"cycle {cycle.pk} heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def execute(cycle, report: Report | None = None) -> None:
    """Run a recorded RetentionCycle, keeping its state and progress up to date; first mark
    failed the cycles whose process died. `report` as for `run_cycle_summary`."""
    sweep_dead_cycles()
    cycle.state = CycleState.RUNNING
    cycle.started_at = cycle.heartbeat_at = timezone.now()
    cycle.runner = redis_locks.holder_token()
    cycle.save(update_fields=["state", "started_at", "heartbeat_at", "runner"])
    last_save = [0.0]

    def progress(done: int, total: int) -> None:
        cycle.streams_done, cycle.streams_total = done, total
        if done == total or time.monotonic() - last_save[0] > 0.5:  # at most two writes a second
            cycle.save(update_fields=["streams_done", "streams_total"])
            last_save[0] = time.monotonic()

    try:
        streams = [cycle.stream] if cycle.stream_id else None
        cycle.engine = choose_engine(cycle.engine, len(streams) if streams else streams_with_policy().count())
        cycle.save(update_fields=["engine"])
        with heartbeat(cycle):
            summary = run_cycle_summary(
                now=cycle.clock,
                streams=streams,
                trigger=cycle.trigger,
                user=cycle.requested_by,
                engine=cycle.engine,
                progress=progress,
                report=report,
            )
    except Exception as exc:
        cycle.state = CycleState.FAILED
        cycle.error = f"{type(exc).__name__}: {exc}"
        cycle.finished_at = timezone.now()
        cycle.save(update_fields=["state", "error", "finished_at"])
        raise
    cycle.truncations = summary.truncations
    cycle.bytes_reclaimed = summary.bytes_reclaimed
    cycle.state = CycleState.DONE
    cycle.finished_at = timezone.now()
    cycle.save(update_fields=["truncations", "bytes_reclaimed", "state", "finished_at"])
