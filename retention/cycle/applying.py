"""Applying a batch's decisions: the truncations through `retention.truncation` (the one
truncation path), the retention sets stored, the streams marked full or not."""

from __future__ import annotations

from datetime import datetime

from domain.cuts import moves_head
from domain.retention import Decision
from retention import truncation
from retention.cycle.gathering import Prepared
from retention.cycle.outcomes import StreamOutcome, Truncation
from retention.models import TruncationRecord
from retention.set_store import write_sets
from streams.lookups import forget_streams
from streams.models import Stream


def apply_batch(
    items: list[tuple[Prepared, Decision, list[dict]]],
    now: datetime,
    trigger: str,
    user=None,
    retry: bool = False,
    record_only: bool = False,
) -> list[StreamOutcome]:
    """Truncate the streams whose decision moves their head (`retention.truncation`: recorded,
    truncated with one sync for the batch, completed, expired checkpoints dropped); store the
    retention sets (the tails recorded, the records behind the new heads dropped); mark streams
    full or not (`reject_publish`). `retry`: an earlier attempt of this bucket may have truncated
    some of these streams in this cycle (see `_done_before`). `record_only`: the truncations are
    recorded, not applied (an executor that does not see the store: the driver applies them)."""
    outcomes: dict[int, StreamOutcome] = {}
    planned: list[tuple[Prepared, TruncationRecord, dict[str, int]]] = []
    triggered_by = user if user is not None and user.is_authenticated else None
    decisions = {p.stream.pk: decision for p, decision, _ in items}
    for p, decision, subscribers in items:
        target = target_of(p, decision.cut)
        if target is None:
            outcomes[p.stream.pk] = StreamOutcome(p.stream.full_name, decision.rule, None, decision.at_max, p.stream.pk)
            continue
        sizes = p.segment_sizes(target)
        record = TruncationRecord(
            stream=p.stream,
            created_at=now,
            before_cut=p.head,
            after_cut=target,
            before_size=sum(p.head_sizes.values()),
            after_size=sum(sizes.values()),
            tail_size=sum(p.tail_sizes.values()),
            rule=decision.rule,
            subscribers=subscribers,
            trigger=trigger,
            triggered_by=triggered_by,
            completed=False,
        )
        planned.append((p, record, sizes))
    if retry:
        outcomes.update(_done_before(items, outcomes, now, trigger))
    plans: list[truncation.Planned] = [(p.stream, p.log, record, sizes) for p, record, sizes in planned]
    (truncation.record if record_only else truncation.truncate)(plans)
    for p, r, _ in planned:  # after truncating, which corrects a record's size to the store's
        done = Truncation(r.pk, r.after_cut, r.reclaimed_bytes)
        outcomes[p.stream.pk] = StreamOutcome(
            p.stream.full_name, r.rule, done, decisions[p.stream.pk].at_max, p.stream.pk
        )
    truncated_at = {p.stream.pk: r.after_cut for p, r, _ in planned}
    sets = {}
    for p, _, _ in items:
        rows = p.retention_set_after(truncated_at.get(p.stream.pk))
        if rows is not None:
            sets[p.stream.pk] = rows
    write_sets(sets)
    _mark_full([(p.stream, d.at_max) for p, d, _ in items], now)
    return [outcomes[p.stream.pk] for p, _, _ in items]


def _done_before(items, outcomes: dict[int, StreamOutcome], now: datetime, trigger: str) -> dict[int, StreamOutcome]:
    """In a retried bucket, the streams this attempt leaves alone that an earlier attempt of the
    same cycle truncated (its record completed then, or by this attempt's gathering): their
    outcome is that truncation, as if the bucket had run once."""
    still = [p.stream.pk for p, _, _ in items if outcomes.get(p.stream.pk) and outcomes[p.stream.pk].truncation is None]
    found = {}
    done = TruncationRecord.objects.filter(stream_id__in=still, created_at=now, trigger=trigger, completed=True)
    for record in done.order_by("id"):
        was = outcomes[record.stream_id]
        truncated = Truncation(record.pk, record.after_cut, record.reclaimed_bytes)
        found[record.stream_id] = StreamOutcome(was.stream, record.rule, truncated, was.at_max, record.stream_id)
    return found


def target_of(p: Prepared, cut) -> dict[str, int] | None:
    """Where a decision's cut moves the stream's head (within its head and tail), or None."""
    if cut is None or not moves_head(cut, p.head):
        return None
    return {s: min(max(p.head[s], int(cut.get(s, p.head[s]))), p.tail[s]) for s in p.head}


def _mark_full(states: list[tuple[Stream, bool]], now: datetime) -> None:
    """`on_max_limit: reject_publish`: a stream at its max whose slowest subscriber still needs
    the data refuses publishing (507) until a cycle finds it below the max again."""
    full = [s.pk for s, at_max in states if at_max and s.full_since is None]
    freed = [s.pk for s, at_max in states if not at_max and s.full_since is not None]
    if full:
        Stream.objects.filter(pk__in=full).update(full_since=now)
    if freed:
        Stream.objects.filter(pk__in=freed).update(full_since=None)
    if full or freed:
        forget_streams()  # publishes read `full_since`: every process looks the streams up again
    for stream, at_max in states:
        if at_max and stream.full_since is None:
            stream.full_since = now
        elif not at_max:
            stream.full_since = None
