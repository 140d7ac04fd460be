"""A retention cycle (DESIGN.md §6): for every stream with a policy, record the tail cut, decide,
truncate, and keep the history. The rule itself is `retention.policy.decide`; this module gathers
its inputs from the database and the store and applies its answer.

Safety: a Redis lock per stream makes concurrent cycles take turns (each re-reads the state, so
nothing is truncated twice); a truncation is recorded before the store is touched and completed
after, so a cycle that dies half-way is finished by the next one; a target at or behind the head
is a silent no-op.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.utils import timezone

from cbrweb.redis_client import get_redis
from streams.models import RetentionType, Stream, Subscription
from streams.services import stream_log

from .cuts import moves_head
from .models import CycleState, RetentionSetRecord, TruncationRecord
from .policy import Decision, Inputs, Subscriber, decide
from .retention_set import with_tail
from .services import complete_truncation, do_truncate

LOCK_TIMEOUT_S = 600  # a lock outlives a dead holder by at most this long
LOCK_WAIT_S = 60


@dataclass(frozen=True)
class StreamOutcome:
    stream: str
    rule: str
    record: TruncationRecord | None
    at_max: bool = False

    def line(self) -> str:
        if self.record is None:
            return f"{self.stream}: no truncation ({self.rule})"
        return (
            f"{self.stream}: truncated at {self.record.after_cut} ({self.rule}), "
            f"reclaimed {self.record.reclaimed_bytes} bytes"
        )


def streams_with_policy():
    return Stream.objects.filter(retention_policy__isnull=False).select_related(
        "scope", "retention_policy"
    )


def gather_inputs(stream: Stream, now: datetime, interval: float) -> tuple[Inputs, dict[str, int]]:
    """Record the tail in the retention set, then read everything `decide` needs."""
    log = stream_log(stream)
    head = log.head_cut()
    tail = log.tail_cut()
    rows = list(stream.retention_set.all())
    rset = tuple(r.as_record() for r in rows)
    grown = with_tail(rset, now.timestamp(), interval, tail, log.size_till(tail))
    if len(grown) > len(rset):
        RetentionSetRecord.objects.create(
            stream=stream, recorded_at=now, size_bytes=grown[-1].size, cut=tail
        )
    subscribers = []
    subscriptions = (
        Subscription.objects.filter(stream=stream)
        .exclude(reader_group__retention_type=RetentionType.NONE)
        .select_related("reader_group__scope")
    )
    for sub in subscriptions:
        cut = None
        sizes = None
        if sub.acknowledgement_cut is not None:
            # a cut behind the head (data a max limit removed) counts as at the head
            cut = {s: max(int(sub.acknowledgement_cut.get(s, 0)), head[s]) for s in head}
            sizes = {s: log.segment(s).size_till(o) for s, o in cut.items()}
        subscribers.append(
            Subscriber(
                name=str(sub.reader_group),
                cut=cut,
                cut_sizes=sizes,
                acknowledged_at=sub.acknowledged_at.timestamp() if sub.acknowledged_at else None,
                subscribed_at=sub.created_at.timestamp(),
            )
        )
    policy = stream.retention_policy.as_policy(stream.on_max_limit)
    inputs = Inputs(now.timestamp(), policy, grown, tuple(subscribers))
    return inputs, head


def apply_decision(
    stream: Stream, inputs: Inputs, decision: Decision, head: dict[str, int], trigger: str, user=None
) -> TruncationRecord | None:
    if decision.cut is None or not moves_head(decision.cut, head):
        return None
    considered = [
        {"name": s.name, "cut": dict(s.cut), "acknowledged_at": s.acknowledged_at}
        for s in inputs.subscribers
        if s.name in decision.active
    ]
    return do_truncate(
        stream, dict(decision.cut), rule=decision.rule, trigger=trigger, user=user,
        subscribers=considered, at=datetime.fromtimestamp(inputs.now, tz=UTC),
    )


@contextmanager
def stream_lock(stream: Stream):
    """Yields True when this process holds the stream's retention lock, False if it timed out."""
    lock = get_redis().lock(f"cbr:retention:{stream.pk}", timeout=LOCK_TIMEOUT_S)
    held = lock.acquire(blocking_timeout=LOCK_WAIT_S)
    try:
        yield held
    finally:
        if held:
            lock.release()


def _prepare(stream: Stream, now: datetime) -> tuple[Inputs, dict[str, int]]:
    for pending in stream.truncations.filter(completed=False):
        complete_truncation(pending)
    return gather_inputs(stream, now, settings.CBR_RETENTION_INTERVAL)


def run_stream(stream: Stream, now: datetime, trigger: str, user=None) -> StreamOutcome:
    """The local engine: gather, decide and apply for one stream under its lock."""
    with stream_lock(stream) as held:
        if not held:
            return StreamOutcome(stream.full_name, "skipped:locked-by-another-cycle", None)
        inputs, head = _prepare(stream, now)
        decision = decide(inputs)
        record = apply_decision(stream, inputs, decision, head, trigger, user)
        return StreamOutcome(stream.full_name, decision.rule, record, decision.at_max)


def choose_engine(engine: str, stream_count: int) -> str:
    if engine == "auto":
        return "spark" if stream_count >= settings.CBR_SPARK_MIN_STREAMS else "local"
    return engine


def run_cycle(
    *,
    now: datetime | None = None,
    streams: Iterable[Stream] | None = None,
    trigger: str = "beat",
    user=None,
    engine: str = "local",
    progress: Callable[[int, int], None] | None = None,
) -> list[StreamOutcome]:
    now = now or timezone.now()
    targets = list(streams if streams is not None else streams_with_policy())
    if choose_engine(engine, len(targets)) == "spark":
        return _run_on_spark(targets, now, trigger, user, progress)
    outcomes = []
    for done, stream in enumerate(targets, 1):
        outcomes.append(run_stream(stream, now, trigger, user))
        if progress:
            progress(done, len(targets))
    return outcomes


def _run_on_spark(targets, now, trigger, user, progress) -> list[StreamOutcome]:
    """The Spark engine: gather every stream's inputs (recording its tail), decide them all in one
    Spark job with the same `decide`, then apply each decision under the stream's lock, skipping a
    stream whose head moved meanwhile (the next cycle decides it afresh)."""
    from spark_tasks.retention_job import decide_all

    gathered: dict[int, tuple[Stream, Inputs, dict[str, int]]] = {}
    skipped = []
    for stream in targets:
        with stream_lock(stream) as held:
            if not held:
                skipped.append(StreamOutcome(stream.full_name, "skipped:locked-by-another-cycle", None))
                continue
            inputs, head = _prepare(stream, now)
            gathered[stream.pk] = (stream, inputs, head)
    decisions = decide_all({pk: inputs for pk, (_, inputs, _) in gathered.items()})
    outcomes = list(skipped)
    for done, (pk, (stream, inputs, head)) in enumerate(gathered.items(), 1):
        decision = decisions[pk]
        with stream_lock(stream) as held:
            if not held or stream_log(stream).head_cut() != head:
                outcomes.append(StreamOutcome(stream.full_name, "skipped:changed-while-deciding", None))
            else:
                record = apply_decision(stream, inputs, decision, head, trigger, user)
                outcomes.append(StreamOutcome(stream.full_name, decision.rule, record, decision.at_max))
        if progress:
            progress(done, len(gathered))
    return outcomes


def execute(cycle) -> None:
    """Run a recorded RetentionCycle, keeping its state and progress up to date."""
    cycle.state = CycleState.RUNNING
    cycle.started_at = timezone.now()
    cycle.save(update_fields=["state", "started_at"])
    last_save = [0.0]

    def progress(done: int, total: int) -> None:
        cycle.streams_done, cycle.streams_total = done, total
        if done == total or time.monotonic() - last_save[0] > 0.5:  # at most two writes a second
            cycle.save(update_fields=["streams_done", "streams_total"])
            last_save[0] = time.monotonic()

    try:
        streams = [cycle.stream] if cycle.stream_id else None
        cycle.engine = choose_engine(
            cycle.engine, len(streams) if streams else streams_with_policy().count()
        )
        cycle.save(update_fields=["engine"])
        outcomes = run_cycle(
            now=cycle.clock, streams=streams, trigger=cycle.trigger, user=cycle.requested_by,
            engine=cycle.engine, progress=progress,
        )
    except Exception as exc:
        cycle.state = CycleState.FAILED
        cycle.error = f"{type(exc).__name__}: {exc}"
        cycle.finished_at = timezone.now()
        cycle.save(update_fields=["state", "error", "finished_at"])
        raise
    records = [o.record for o in outcomes if o.record is not None]
    cycle.truncations = len(records)
    cycle.bytes_reclaimed = sum(r.reclaimed_bytes for r in records)
    cycle.state = CycleState.DONE
    cycle.finished_at = timezone.now()
    cycle.save(update_fields=["truncations", "bytes_reclaimed", "state", "finished_at"])
