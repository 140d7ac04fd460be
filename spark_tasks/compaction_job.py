"""The compactor's transforms (docs/design/compaction.md "A run"), each a pure DataFrame →
DataFrame function, so the worked examples test them one by one on a local session; `compact`
chains them. Orchestration (which chunks, writing, switching generations) is
`compaction.runs`.

Rows of a view and of the events read from sealed chunks' Parquet copies share one shape:
`segment, offset, published_at, key, payload, payload_size, routing_key, headers` plus
`tombstone_since` (when a run first kept the tombstone; null for values and for new events).
A position is ordered by `(published_at, segment number, offset)`: publish times never go back
within a segment, so this is offset order there and publish order across segments.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import DataFrame, Observation, Window
from pyspark.sql import functions as F

VIEW_COLUMNS = [
    "segment",
    "offset",
    "published_at",
    "key",
    "payload",
    "payload_size",
    "routing_key",
    "headers",
    "tombstone_since",
]


def as_view_rows(events: DataFrame) -> DataFrame:
    """Events of sealed chunks in the view's shape (no tombstone has been kept yet)."""
    return events.select(*[c for c in VIEW_COLUMNS if c != "tombstone_since"]).withColumn(
        "tombstone_since", F.lit(None).cast("timestamp")
    )


def no_new_events(view: DataFrame) -> DataFrame:
    """No events, in the shape events are read in (a run over nothing new, which only drops what
    aged from the view): the view's own columns, no row."""
    return view.select(*[c for c in VIEW_COLUMNS if c != "tombstone_since"]).where(F.lit(False))


def drop_keyless(rows: DataFrame) -> DataFrame:
    """Events without a key have no place in the view."""
    return rows.where(F.col("key").isNotNull())


def latest_per_key(rows: DataFrame, broadcast_winners: bool = True) -> DataFrame:
    """Per key, the row with the highest position, without sorting the rows themselves (their
    payloads): the winners' positions are found on narrow columns, then the
    winning rows picked out of the input by a semi-join on `(segment, offset)`.

    1. Per key and segment, the highest offset and its publish time: publish times never go back
       within a segment (docs/decisions.md), so there offset order is position order, and both
       aggregates are over longs, a hash aggregation (Parquet reads only these columns).
    2. Per key, the best of its segments' winners by `(published_at, segment, offset)`: a few
       rows per key at most.
    3. The rows whose `(segment, offset)` won (unique among the input rows: the chunks compacted
       come after the previous generation's horizon). The winners are broadcast, so the wide
       input is read and filtered where it lies, in parallel; without `broadcast_winners`
       (more keys than the driver can hold) both sides are shuffled by position and joined by
       a hash table of each partition's winners (still no sort of the input rows)."""
    segment = F.col("segment").cast("int")
    per_segment = rows.groupBy(F.xxhash64("key").alias("_key_hash"), "key", segment.alias("_segment")).agg(
        F.max("offset").alias("_offset"), F.max_by("published_at", "offset").alias("_at")
    )
    winners = (
        per_segment.groupBy("_key_hash", "key")
        .agg(F.max_by(F.struct("_segment", "_offset"), F.struct("_at", "_segment", "_offset")).alias("_won"))
        .select("_won._segment", "_won._offset")
    )
    winners = F.broadcast(winners) if broadcast_winners else winners.hint("shuffle_hash")
    picked = rows.join(winners, (segment == F.col("_segment")) & (F.col("offset") == F.col("_offset")), "left_semi")
    return picked.select(*VIEW_COLUMNS)


def in_key_order(view: DataFrame) -> DataFrame:
    """The layout a generation is written in: the view's partitions (one per split of the input
    the winning rows were picked from) each sorted by key, so every file of a generation is in
    key order and a reader pages by key
    by merging the files' heads (`compaction.view.read_view`). No global sort: that would cost a
    sampling job and a second shuffle of the whole view."""
    return view.sortWithinPartitions("key")


def with_tombstone_flag(rows: DataFrame, now: datetime, delete_retention_s: int) -> DataFrame:
    """Adds `_expired`: a tombstone (empty payload) is kept through the run that first keeps it
    (its `tombstone_since` is set then) and until `delete_retention_s` has passed since; a later
    run drops it."""
    is_tomb = F.col("payload_size") == 0
    since = F.coalesce(F.col("tombstone_since"), F.lit(now).cast("timestamp"))
    rows = rows.withColumn("tombstone_since", F.when(is_tomb, since))
    expired = (
        is_tomb
        & (F.col("tombstone_since") < F.lit(now))
        & (F.col("tombstone_since") + F.expr(f"INTERVAL {int(delete_retention_s)} SECONDS") <= F.lit(now))
    )
    return rows.withColumn("_expired", expired)


def with_retention_flag(
    rows: DataFrame, now: datetime, retention_s: int | None, retention_bytes: int | None
) -> DataFrame:
    """Adds `_marked` (`compact,delete`): a row older than `retention_s`, or one whose size,
    summed with every newer row's, exceeds `retention_bytes`. Either rule suffices. (Tombstones
    weigh nothing, so dropping expired ones first would change no total.)"""
    marked = F.lit(False)
    if retention_s is not None:
        marked = marked | (F.col("published_at") < F.lit(now) - F.expr(f"INTERVAL {int(retention_s)} SECONDS"))
    if retention_bytes is not None:
        rows = with_newer_bytes(rows)
        marked = marked | (F.col("_newer_bytes") > F.lit(retention_bytes))
    return rows.withColumn("_marked", marked).drop("_newer_bytes")


def with_newer_bytes(rows: DataFrame) -> DataFrame:
    """Adds `_newer_bytes`: the row's payload size plus every newer row's (by position).

    Summed in two parts so that no step puts the whole view in one partition: within the row's
    publish time (ms), a running sum over the rows of that millisecond (partitioned by it, in
    parallel); and over the earlier milliseconds, a running sum of per-millisecond totals — one
    narrow row per distinct publish time, the only step in one partition."""
    ms = F.col("published_at")
    same_ms_newest_first = (
        Window.partitionBy(ms)
        .orderBy(F.col("segment").cast("int").desc(), F.col("offset").desc())
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    in_ms = rows.withColumn("_in_ms", F.sum("payload_size").over(same_ms_newest_first))
    newer_ms = Window.orderBy(F.col("_ms").desc()).rowsBetween(Window.unboundedPreceding, -1)
    totals = (
        rows.groupBy(ms.alias("_ms"))
        .agg(F.sum("payload_size").alias("_ms_bytes"))
        .withColumn("_before_ms", F.coalesce(F.sum("_ms_bytes").over(newer_ms), F.lit(0)))
        .drop("_ms_bytes")
    )
    joined = in_ms.join(totals, F.col("published_at") == F.col("_ms"))
    return joined.withColumn("_newer_bytes", F.col("_in_ms") + F.col("_before_ms")).drop("_in_ms", "_ms", "_before_ms")


def tombstone_lifecycle(rows: DataFrame, now: datetime, delete_retention_s: int) -> DataFrame:
    """The rows without the tombstones whose time has passed (see `with_tombstone_flag`)."""
    return with_tombstone_flag(rows, now, delete_retention_s).where(~F.col("_expired")).drop("_expired")


def retention_marks(rows: DataFrame, now: datetime, retention_s: int | None, retention_bytes: int | None) -> DataFrame:
    """The rows the compacted retention keeps (see `with_retention_flag`)."""
    return with_retention_flag(rows, now, retention_s, retention_bytes).where(~F.col("_marked")).drop("_marked")


@dataclass(frozen=True)
class CompactionSettings:
    delete_retention_s: int
    retention_s: int | None = None  # compact,delete only
    retention_bytes: int | None = None
    # the winners' positions (a few bytes per key) are broadcast to pick the rows out of the
    # input where it lies; a run whose keys could outgrow the driver's memory joins them by a
    # shuffle instead (`compaction.runs.broadcast_fits`)
    broadcast_winners: bool = True


def _flagged(previous: DataFrame | None, new_rows: DataFrame, now: datetime, settings: CompactionSettings) -> DataFrame:
    rows = drop_keyless(new_rows)
    if previous is not None:
        rows = previous.select(*VIEW_COLUMNS).unionByName(rows)
    latest = with_tombstone_flag(latest_per_key(rows, settings.broadcast_winners), now, settings.delete_retention_s)
    return with_retention_flag(latest, now, settings.retention_s, settings.retention_bytes)


def _kept():
    return ~F.col("_expired") & ~F.col("_marked")


def compact(previous: DataFrame | None, events: DataFrame, now: datetime, settings: CompactionSettings) -> DataFrame:
    """The new view: the previous one followed by the new events, latest per key, tombstones
    through their lifecycle, then the retention marks."""
    return _flagged(previous, as_view_rows(events), now, settings).where(_kept()).drop("_expired", "_marked")


@dataclass(frozen=True)
class CompactionStats:
    tombstones_dropped: int
    marked: int
    rows: int  # of the view (one per key)
    tombstones: int  # kept in the view
    bytes: int  # payload bytes of the view


@dataclass
class Compaction:
    """A run's new view, and what each step dropped once the view has been written: the counts
    are observed (`DataFrame.observe`) on the latest rows while the one job that writes the view
    runs, so the input is read once and the latest rows computed once. (The input's own counts
    come from the chunks' Parquet metadata, `compaction.runs.chunk_copies`: observing every input
    row cost a fifth of the job at 10M events.)"""

    view: DataFrame  # what to write
    _flagged: Observation

    def stats(self) -> CompactionStats:
        """Only after the view has been written (before, it waits for that job)."""
        flagged = self._flagged.get
        return CompactionStats(
            tombstones_dropped=flagged["expired"] or 0,
            marked=flagged["marked"] or 0,
            rows=flagged["rows"] or 0,
            tombstones=flagged["tombstones"] or 0,
            bytes=flagged["bytes"] or 0,
        )


def compact_with_stats(
    previous: DataFrame | None, events: DataFrame, now: datetime, settings: CompactionSettings
) -> Compaction:
    """`compact`, with what each step dropped (the run's history record): the steps flag rows
    instead of dropping them, and an observation counts the flags as the view is written."""
    kept = _kept()
    after = Observation()
    flagged = _flagged(previous, as_view_rows(events), now, settings).observe(
        after,
        F.sum(F.col("_expired").cast("int")).alias("expired"),
        F.sum((~F.col("_expired") & F.col("_marked")).cast("int")).alias("marked"),
        F.sum(kept.cast("int")).alias("rows"),
        F.sum((kept & (F.col("payload_size") == 0)).cast("int")).alias("tombstones"),
        F.sum(F.when(kept, F.col("payload_size"))).alias("bytes"),
    )
    return Compaction(flagged.where(kept).drop("_expired", "_marked"), after)
