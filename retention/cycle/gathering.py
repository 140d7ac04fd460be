"""Gathering a cycle's inputs: the streams loaded, locked and read batch by batch into what
`decide` needs (`Prepared`), with what applying its answer needs besides."""

from __future__ import annotations

import gc
from collections import defaultdict
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import cast

import orjson
from django.db import connection
from django.db.models import F, FloatField, Func, TextField
from django.db.models.functions import Cast

from domain.retention import COMPACTOR, Inputs, Subscriber
from domain.retention_set import after_truncation, with_tail
from groups.models import RetentionType, Subscription
from retention.locks import Locks
from retention.models import RetentionPolicy
from retention.set_store import as_records, read_sets, stored
from retention.truncation import finish_truncations, pending_truncations
from store.store import StreamLog, ends_many
from streams.logs import stream_log
from streams.models import Stream

BATCH = 500

# A stream's ends as a driver read them for an executor that does not see the store, per segment:
# (head offset, size till the head, tail offset, size till the tail)
ShippedEnds = dict[str, tuple[int, int, int, int]]


class StoreNeeded(Exception):
    """Gathering from shipped ends (an executor that does not see the data directory) needed a
    size only the store knows: a cut that is neither a head, a tail, nor recorded with its sizes.
    The stream is left to the driver, which runs it as the local engine does."""


class NoStore:
    """The log of a stream gathered from shipped ends: every read of the store raises
    `StoreNeeded` (it stands for `StreamLog` and `Segment` alike: only `size_till` is asked)."""

    def segment(self, segment_id: str) -> NoStore:
        return self

    def size_till(self, offset: int) -> int:
        raise StoreNeeded(offset)


@dataclass
class Prepared:
    """One stream's inputs, with what applying a decision needs besides."""

    stream: Stream
    log: StreamLog  # or a `NoStore` standing for it
    inputs: Inputs
    head: dict[str, int]
    head_sizes: dict[str, int]
    tail: dict[str, int]
    tail_sizes: dict[str, int]
    # the retention set as stored (`retention.set_store`), in set order, the tail's new record
    # included; `stored_count` of them were stored when the batch was read
    rset_rows: list
    stored_count: int

    def segment_sizes(self, cut: dict[str, int]) -> dict[str, int]:
        """size_till of each segment's offset in `cut`, where already known (the head, the tail,
        a subscriber's or a retention record's cut); the store is read for the rest."""
        for _, _, recorded, sizes in reversed(self.rset_rows):
            # most targets are a retention record's cut: its sizes were stored with it
            if recorded == cut and sizes and all(sizes.get(s) is not None for s in cut):
                return {s: int(sizes[s]) for s in cut}
        known: dict[str, int] = {}
        for seg, offset in cut.items():
            if offset == self.head[seg]:
                known[seg] = self.head_sizes[seg]
            elif offset == self.tail[seg]:
                known[seg] = self.tail_sizes[seg]
            else:
                size = self._recorded_size(seg, offset)
                known[seg] = self.log.segment(seg).size_till(offset) if size is None else size
        return known

    def _recorded_size(self, seg: str, offset: int) -> int | None:
        compactor = self.inputs.compactor
        for sub in (*self.inputs.subscribers, *((compactor,) if compactor is not None else ())):
            if sub.cut and sub.cut.get(seg) == offset:
                assert sub.cut_sizes is not None  # `_subscriber` gathers a cut with its sizes
                return sub.cut_sizes[seg]
        for _, _, cut, sizes in reversed(self.rset_rows):
            if sizes and cut.get(seg) == offset and seg in sizes:
                return int(sizes[seg])
        return None

    def retention_set_after(self, cut: dict[str, int] | None) -> list | None:
        """The rows to store once the cycle is done with this stream (truncated at `cut`, or not
        truncated: None), or None when what is stored is already that."""
        rows = self.rset_rows
        if cut is not None:
            rows = rows[len(rows) - len(after_truncation(self.inputs.retention_set, cut)) :]
        unchanged = len(rows) == len(self.rset_rows) == self.stored_count  # nothing added or dropped
        return None if unchanged else rows


# What a cycle reads of a stream, its scope and its policy: the rest (the delayed index's JSON,
# timestamps, descriptions) cost more to load for 100k streams than the decisions.
_CYCLE_FIELDS = (
    "id",
    "name",
    "storage_key",
    "segment_count",
    "scaled_segments",
    "on_max_limit",
    "full_since",
    "cleanup_policy",
    "scope__name",
    "retention_policy__id",
    "retention_policy__stream_id",
    *(f"retention_policy__{column}" for column in RetentionPolicy.COLUMNS.values()),
)


def streams_with_policy():
    return Stream.objects.filter(retention_policy__isnull=False).select_related("scope", "retention_policy")


def load_streams(ids: list[int]) -> list[Stream]:
    """The streams with these ids that still have a policy, in the ids' order, with only what a
    cycle reads of them (`_CYCLE_FIELDS`)."""
    by_id = {s.pk: s for s in streams_with_policy().only(*_CYCLE_FIELDS).filter(pk__in=ids)}
    return [by_id[i] for i in ids if i in by_id]


def prepare_batch(
    streams: list[Stream],
    now: datetime,
    interval: float,
    recover: bool = True,
    shipped: dict[int, ShippedEnds] | None = None,
) -> list[Prepared]:
    """Finish truncations a crash left half done, record each stream's tail in its retention set
    (when the newest record is older than the interval: stored when the batch is applied), and
    read everything `decide` needs: three queries for the batch, one small file read per stream.
    `recover=False` reads only (`retention.explain`: what the next cycle would decide).

    `shipped`: the streams' ends as the driver read them, by stream id; the store is not read
    (an executor that does not see the data directory): a stream without shipped ends, or whose
    gathering needs the store (`StoreNeeded`), is left out."""
    pks = [s.pk for s in streams]
    if recover:
        finish_truncations(pending_truncations(pks))
    sets = read_sets(pks)
    subs: dict[int, list] = defaultdict(list)
    for row in (
        Subscription.objects.filter(stream_id__in=pks)
        .exclude(reader_group__retention_type=RetentionType.NONE)
        .order_by("stream_id", "id")
        # the cuts as text, decoded by orjson: the JSON field's own decoding was a tenth of
        # preparing a batch
        .annotate(
            cut_text=Cast("acknowledgement_cut", TextField()), sizes_text=Cast("acknowledgement_sizes", TextField())
        )
        .annotate(acked_s=_epoch_seconds("acknowledged_at"), since_s=_epoch_seconds("created_at"))
        .values_list(
            "stream_id",
            "reader_group__scope__name",
            "reader_group__name",
            "cut_text",
            "sizes_text",
            "acked_s",
            "since_s",
            "reader_group__subscriber_timeout_s",
        )
    ):
        subs[row[0]].append(row[1:])
    horizons = _view_horizons([s.pk for s in streams if s.is_compacted])
    prepared = []
    for stream, log, (head, head_sizes, tail, tail_sizes) in _ends(streams, shipped):
        rset_rows = sets.get(stream.pk, [])
        stored_count = len(rset_rows)
        rset = as_records(rset_rows)
        grown = with_tail(rset, now.timestamp(), interval, tail, sum(tail_sizes.values()))
        if len(grown) > len(rset):
            rset_rows = [*rset_rows, stored(now, grown[-1].size, tail, tail_sizes)]
        try:
            subscribers = tuple(_subscriber(row, log, head, head_sizes, tail, tail_sizes) for row in subs[stream.pk])
            compactor = None
            if stream.is_compacted:
                compactor = _compactor(horizons.get(stream.pk, {}), now, log, head, head_sizes, tail, tail_sizes)
        except StoreNeeded:
            continue  # only from shipped ends: the driver runs this stream
        policy = stream.retention_policy.as_policy(stream.on_max_limit)
        prepared.append(
            Prepared(
                stream,
                log,
                Inputs(now.timestamp(), policy, grown, subscribers, compactor),
                head,
                head_sizes,
                tail,
                tail_sizes,
                rset_rows,
                stored_count,
            )
        )
    return prepared


Ends = tuple[dict[str, int], dict[str, int], dict[str, int], dict[str, int]]  # head, its sizes, tail, its sizes


def _ends(streams: list[Stream], shipped: dict[int, ShippedEnds] | None) -> list[tuple[Stream, StreamLog, Ends]]:
    """Each stream with its log and its ends: read from the store (the reads overlapped), or as
    shipped (a stream without shipped ends is left out)."""
    if shipped is None:
        logs = [stream_log(stream) for stream in streams]
        return [
            (
                stream,
                log,
                (
                    {s: h.offset for s, (h, _) in ends.items()},
                    {s: h.cum_size for s, (h, _) in ends.items()},
                    {s: t.next_offset for s, (_, t) in ends.items()},
                    {s: t.cum_size for s, (_, t) in ends.items()},
                ),
            )
            for stream, log, ends in zip(streams, logs, ends_many(logs))
        ]
    found = []
    for stream in streams:
        ends = shipped.get(stream.pk)
        if ends is not None:
            head, head_sizes, tail, tail_sizes = ({s: e[i] for s, e in ends.items()} for i in range(4))
            found.append((stream, cast(StreamLog, NoStore()), (head, head_sizes, tail, tail_sizes)))
    return found


def ship_ends(streams: list[Stream]) -> dict[int, ShippedEnds]:
    """The streams' ends read from the store here, as an executor that does not see it takes them
    (`prepare_batch`'s `shipped`)."""
    logs = [stream_log(stream) for stream in streams]
    return {
        stream.pk: {s: (h.offset, h.cum_size, t.next_offset, t.cum_size) for s, (h, t) in ends.items()}
        for stream, ends in zip(streams, ends_many(logs))
    }


def _epoch_seconds(field: str):
    """A time column as epoch seconds computed by PostgreSQL (the float `datetime.timestamp()`
    gives: both round the exact microseconds once): 60k datetimes parsed a 10k cycle otherwise.
    Other databases send the datetime."""
    if connection.vendor != "postgresql":
        return F(field)
    return Func(F(field), template="EXTRACT(EPOCH FROM %(expressions)s)::float8", output_field=FloatField())


def _seconds(value: datetime | float) -> float:
    return value.timestamp() if isinstance(value, datetime) else value


def _subscriber(row, log, head, head_sizes, tail, tail_sizes) -> Subscriber:
    scope, name, ack, ack_sizes, acked_at, created_at, timeout_s = row
    cut = sizes = None
    ack = None if ack is None else orjson.loads(ack)
    ack_sizes = None if ack_sizes is None else orjson.loads(ack_sizes)
    if ack is not None:
        # a cut behind the head (data a max limit removed) counts as at the head

        def recorded(s: str, offset: int) -> int | None:  # with the cut: no store read
            if ack_sizes and ack_sizes.get(s) is not None and int(ack[s]) == offset:
                return int(ack_sizes[s])
            return None

        cut = {s: max(int(ack.get(s, 0)), head[s]) for s in head}
        sizes = _sizes_at(cut, log, head, head_sizes, tail, tail_sizes, recorded)
    return Subscriber(
        name=f"{scope}/{name}",
        cut=cut,
        cut_sizes=sizes,
        acknowledged_at=None if acked_at is None else _seconds(acked_at),
        subscribed_at=_seconds(created_at),
        timeout_s=timeout_s,
    )


def _view_horizons(pks: list[int]) -> dict[int, dict]:
    """The compacted streams' view horizons (per segment, the first offset the view has not
    folded in), by stream; a stream never compacted has none. Read through the stream's
    relation: the compaction app is not retention's to import."""
    if not pks:
        return {}
    rows = Stream.objects.filter(pk__in=pks, compacted_view__isnull=False).values_list("pk", "compacted_view__horizon")
    return {pk: horizon or {} for pk, horizon in rows}


def _compactor(horizon: dict, now: datetime, log, head, head_sizes, tail, tail_sizes) -> Subscriber:
    """A compacted stream's compactor as the subscriber that holds truncation at its view's
    horizon (`domain.retention.decide`): never behind the head (what a max limit removed is gone
    for the view too), always active."""
    cut = {s: min(max(int(horizon.get(s, 0)), head[s]), tail[s]) for s in head}
    sizes = _sizes_at(cut, log, head, head_sizes, tail, tail_sizes)
    return Subscriber(COMPACTOR, cut, sizes, acknowledged_at=now.timestamp(), subscribed_at=now.timestamp())


def _sizes_at(cut, log, head, head_sizes, tail, tail_sizes, recorded: Callable[[str, int], int | None] | None = None):
    """size_till of each segment's offset in `cut`: known at the head and the tail, else
    `recorded(segment, offset)` (sizes stored with the cut), else read from the store."""
    sizes = {}
    for s, offset in cut.items():
        if offset == head[s]:
            sizes[s] = head_sizes[s]
        elif offset == tail[s]:
            sizes[s] = tail_sizes[s]
        elif recorded is not None and (size := recorded(s, offset)) is not None:
            sizes[s] = size
        else:
            sizes[s] = log.segment(s).size_till(offset)
    return sizes


def batches(items: list, size: int | None = None) -> list[list]:
    size = size or BATCH
    return [items[start : start + size] for start in range(0, len(items), size)]


def lock_and_prepare(
    batch: list[Stream],
    now: datetime,
    interval: float,
    task: str | None = None,
    shipped: dict[int, ShippedEnds] | None = None,
):
    locks = Locks.take(batch, task)
    try:
        # from shipped ends, a half-done truncation is the driver's to finish (`buckets.plan_streams`)
        return batch, locks, prepare_batch(locks.held, now, interval, recover=shipped is None, shipped=shipped)
    except BaseException:
        locks.release()
        raise


def prepared_batches(
    targets: list[Stream],
    now: datetime,
    interval: float,
    task: str | None = None,
    size: int | None = None,
    shipped: dict[int, ShippedEnds] | None = None,
):
    """Yields (batch, locks, prepared) for each batch; the caller releases the locks once it has
    applied the batch. `task` names the unit of work taking the locks (`store.locks.holder_token`).
    (Preparing the next batch in a helper thread meanwhile was tried: on two
    cores shared with the database it made the cycle slower, not faster.)

    The garbage collector's automatic runs are held off during the cycle: a batch makes some
    100k small objects (retention records, cuts), which would trigger collections over every
    object of the process again and again (a fifth of the cycle's time). The youngest
    generation is collected after each batch instead."""
    with no_automatic_gc():
        for batch in batches(targets, size):
            yield lock_and_prepare(batch, now, interval, task, shipped)
            gc.collect(0)


@contextmanager
def no_automatic_gc():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
