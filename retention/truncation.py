"""The one way a stream's data is truncated, for a cycle's batch of streams and for a single
stream alike (a manual truncation, or one a crash left half done, is a batch of one).

A truncation is recorded (`TruncationRecord`, not completed) before the store is touched; then
the heads move and the chunks wholly behind them are deleted (`store.store.truncate_many`); then, in one
transaction, the records are completed with what the store did, the Segment rows follow the heads,
and the checkpoints the new heads expired are dropped. A process that dies in between leaves a
record not completed, which the next cycle over that stream finishes (`pending_truncations`,
`finish_truncations`): the store's half is idempotent, the head never moves back.
"""

from __future__ import annotations

from django.db import connection, transaction
from django.utils import timezone

from domain.cuts import is_at_or_after
from domain.retention_set import after_truncation
from groups.consuming import drop_expired_persisted
from groups.models import Checkpoint, ReaderGroup
from retention.models import TruncationRecord
from retention.set_store import as_records, read_sets, write_sets
from store.segment import TruncateResult
from store.store import StreamLog, truncate_many
from streams import tiering
from streams.db import insert_rows, update_rows
from streams.logs import stream_log
from streams.models import Segment, Stream
from streams.scaling import retire_passed_many

# (the stream, its log, its record, the cumulative size at each offset of the cut where known)
Planned = tuple[Stream, StreamLog, TruncationRecord, dict[str, int] | None]


def truncate(planned: list[Planned], *, own: bool = False) -> None:
    """Record the truncations, apply them to the store, complete them. `own`: the streams'
    truncations only, not a cycle's batch: the head moves are made durable here, and the
    streams' retention sets are trimmed here (a cycle writes the sets it read itself)."""
    if not planned:
        return
    record(planned)  # before the store is touched
    _apply(planned, own)


def record(planned: list[Planned]) -> None:
    """Record the truncations only (not completed): what an executor that does not see the store
    plans, for the driver to apply with `finish_truncations` (or, should the driver die, the next
    cycle over these streams)."""
    if planned:
        with transaction.atomic():
            insert_rows(TruncationRecord, [r for _, _, r, _ in planned])


def finish_truncations(
    records: list[TruncationRecord], *, planned: bool = False, sizes: dict[int, dict[str, int]] | None = None
) -> None:
    """Complete recorded truncations that a crash left half done (usually none): the store's half
    again (whatever of it was done), then the rest as for any truncation. `planned`: truncations
    a cycle's executor recorded without the store (`retention.cycle.buckets.plan_bucket`), which
    wrote the retention sets itself; finished as the cycle's batch would have been (the head
    moves left for the caller to sync, `SegmentStore.sync`; chunks are deleted only behind heads
    made durable first, either way). `sizes`: by record, the cumulative size at each offset of
    its cut, where the planner knew them (the store is read for the others)."""
    if not records:
        return
    sizes = sizes or {}
    _apply([(r.stream, stream_log(r.stream), r, sizes.get(r.pk)) for r in records], own=not planned)


def pending_truncations(pks: list[int]) -> list[TruncationRecord]:
    """The truncations of these streams that a crash left half done (usually none).

    On PostgreSQL, one probe of the small `truncation_pending` index per stream, in a LATERAL
    join that the planner cannot flatten (`OFFSET 0`). The plain `stream_id IN (…) AND NOT
    completed` was planned from the table's statistics, and without fresh ones (the history grew
    by a whole cycle since its last ANALYZE: autovacuum off, or behind) PostgreSQL read the whole
    history for every batch of streams: ~190M blocks in a 1M-stream cycle, whose
    database time grew with every batch. JIT is off for the probe: the same missing statistics
    made its cost look large enough to compile it, 60 ms for 0.5 ms of work."""
    if connection.vendor != "postgresql":
        return list(TruncationRecord.objects.filter(stream_id__in=pks, completed=False).select_related("stream__scope"))
    q = connection.ops.quote_name
    sql = (
        f"SELECT t.{q('id')} FROM unnest(%s::bigint[]) AS s(stream_id) CROSS JOIN LATERAL "
        f"(SELECT {q('id')} FROM {q(TruncationRecord._meta.db_table)} "
        f"WHERE {q('stream_id')} = s.stream_id AND NOT {q('completed')} OFFSET 0) t"
    )
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SET LOCAL jit = off")
        cur.execute(sql, [pks])
        ids = [row[0] for row in cur.fetchall()]
    if not ids:
        return []
    return list(TruncationRecord.objects.filter(pk__in=ids, completed=False).select_related("stream__scope"))


def drop_expired_checkpoints(heads: dict[int, tuple[str, dict[str, int]]]) -> None:
    """After truncations (stream id → (its name, its new head)): a checkpoint that is not
    persisted expires once its cut of a stream lies behind that stream's head on some segment,
    since a reader group could no longer restart from it. A persisted one expires once it lies
    wholly before the heads of every stream it names (PDP-47; `domain.cuts.checkpoint_expired`):
    until then it can still be released (the offsets behind a head count as at it)."""
    truncated = list(heads)
    candidates = Checkpoint.objects.filter(
        persist=False, reader_group__subscription__stream_id__in=truncated
    ).distinct()
    names = {name: head for name, head in heads.values()}
    expired = []
    for cp in candidates.only("pk", "cuts"):
        for name, cut in (cp.cuts or {}).items():
            head = names.get(name)
            if head and not is_at_or_after({s: int(cut.get(s, 0)) for s in head}, head):
                expired.append(cp.pk)
                break
    if expired:
        Checkpoint.objects.filter(pk__in=expired).delete()
    keeping = ReaderGroup.objects.filter(checkpoints__persist=True, subscription__stream_id__in=truncated).distinct()
    for group in keeping.select_related("scope"):
        drop_expired_persisted(group, names)


def _apply(planned: list[Planned], own: bool) -> None:
    results = truncate_many([(log, record.after_cut, sizes) for _, log, record, sizes in planned], durable=own)
    with transaction.atomic():
        _complete(planned, results)
        if own:
            _trim_retention_sets(planned)
    # a sealed segment passed whole retires (a stream that never scaled: nothing), known passed
    # by the heads just written
    scaled = [(stream, result) for (stream, _, _, _), result in zip(planned, results) if stream.scaled_segments]
    heads = {stream.pk: {s: r.head_after for s, r in result.items()} for stream, result in scaled}
    retire_passed_many([stream for stream, _ in scaled], heads=heads)
    # the tier's copies of what the heads passed (nothing without a tier), counted in the records
    written = {
        stream.pk: {s: r.head_after.offset for s, r in result.items()} for (stream, *_), result in zip(planned, results)
    }
    deleted = tiering.delete_passed([stream for stream, _, _, _ in planned], heads=written)
    counted = [(record.pk, *deleted[stream.pk]) for stream, _, record, _ in planned if stream.pk in deleted]
    for stream, _, record, _ in planned:
        record.tier_objects_deleted, record.tier_bytes_deleted = deleted.get(stream.pk, (0, 0))
    update_rows(TruncationRecord, ["tier_objects_deleted", "tier_bytes_deleted"], counted)


def _complete(planned: list[Planned], results: list[dict[str, TruncateResult]]) -> None:
    """The records completed with what the store did (a record's sizes corrected to the store's),
    the Segment rows moved, the expired checkpoints dropped."""
    changed = []
    for (_, _, record, _), result in zip(planned, results):
        counts = (
            sum(r.head_after.cum_size for r in result.values()),
            record.chunks_deleted + sum(r.chunks_deleted for r in result.values()),
            record.bytes_deleted + sum(r.bytes_deleted for r in result.values()),
        )
        if counts != (record.after_size, record.chunks_deleted, record.bytes_deleted):
            record.after_size, record.chunks_deleted, record.bytes_deleted = counts
            changed.append((record.pk, *counts))
        record.completed = True
    TruncationRecord.objects.filter(pk__in=[record.pk for _, _, record, _ in planned]).update(completed=True)
    update_rows(TruncationRecord, ["after_size", "chunks_deleted", "bytes_deleted"], changed)
    _update_segment_rows(planned, results)
    drop_expired_checkpoints({stream.pk: (stream.full_name, record.after_cut) for stream, _, record, _ in planned})


def _trim_retention_sets(planned: list[Planned]) -> None:
    """Drop the retention-set records at or before each new head."""
    sets = read_sets([stream.pk for stream, _, _, _ in planned])
    trimmed = {}
    for stream, _, record, _ in planned:
        rows = sets.get(stream.pk, [])
        kept = after_truncation(as_records(rows), record.after_cut)
        if len(kept) < len(rows):
            trimmed[stream.pk] = rows[len(rows) - len(kept) :]
    write_sets(trimmed)


def _update_segment_rows(planned: list[Planned], results: list[dict[str, TruncateResult]]) -> None:
    """The Segment rows follow the heads moved (the beat's stats refresh does the rest): one
    UPDATE by (stream, segment), the counts lowered in SQL, no read first. Every segment of the
    cut, moved or not: a truncation finished after a crash (an executor killed after the store
    moved its heads) finds the heads already moved, and its rows still behind them."""
    rows = [
        (stream.pk, seg, res.head_after.offset, res.head_after.cum_size, res.chunks_deleted, res.bytes_deleted)
        for (stream, _, _, _), result in zip(planned, results)
        for seg, res in result.items()
    ]
    if not rows:
        return
    now = timezone.now()
    table = connection.ops.quote_name(Segment._meta.db_table)
    postgres = connection.vendor == "postgresql"
    floor = "greatest" if postgres else "max"

    def statement(source: str) -> str:
        return f"""
            WITH v(stream_id, segment_id, head_offset, head_size, chunks, freed) AS (SELECT * FROM {source})
            UPDATE {table} SET head_offset = v.head_offset, head_size = v.head_size,
                chunk_count = {floor}(0, chunk_count - v.chunks),
                physical_bytes = {floor}(0, physical_bytes - v.freed), refreshed_at = %s
            FROM v WHERE {table}.stream_id = v.stream_id AND {table}.segment_id = v.segment_id"""

    with connection.cursor() as cur:
        if postgres:
            source = "unnest(%s::bigint[], %s::text[], %s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[])"
            cur.execute(statement(source), [*[list(col) for col in zip(*rows)], now])
            return
        for start in range(0, len(rows), 100):  # SQLite's parameter limit
            chunk = rows[start : start + 100]
            source = "(VALUES " + ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(chunk)) + ")"
            cur.execute(statement(source), [x for row in chunk for x in row] + [now])
