"""The compactor's transforms (COMPACTION.md "A compaction run"), each a pure DataFrame →
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

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

VIEW_COLUMNS = ["segment", "offset", "published_at", "key", "payload", "payload_size", "routing_key",
                "headers", "tombstone_since"]


def _order():
    return F.struct(F.col("published_at"), F.col("segment").cast("int"), F.col("offset"))


def as_view_rows(events: DataFrame) -> DataFrame:
    """Events of sealed chunks in the view's shape (no tombstone has been kept yet)."""
    return events.select(*[c for c in VIEW_COLUMNS if c != "tombstone_since"]).withColumn(
        "tombstone_since", F.lit(None).cast("timestamp")
    )


def drop_keyless(rows: DataFrame) -> DataFrame:
    """Events without a key have no place in the view."""
    return rows.where(F.col("key").isNotNull())


def latest_per_key(rows: DataFrame) -> DataFrame:
    """Per key, the row with the highest position."""
    latest = rows.groupBy("key").agg(F.max_by(F.struct(*VIEW_COLUMNS), _order()).alias("row"))
    return latest.select("row.*")


def tombstone_lifecycle(rows: DataFrame, now: datetime, delete_retention_s: int) -> DataFrame:
    """A tombstone (empty payload) is kept through the run that first keeps it and until
    `delete_retention_s` has passed since then; a later run drops it."""
    is_tomb = F.col("payload_size") == 0
    since = F.coalesce(F.col("tombstone_since"), F.lit(now).cast("timestamp"))
    rows = rows.withColumn("tombstone_since", F.when(is_tomb, since))
    expired = is_tomb & (F.col("tombstone_since") < F.lit(now)) & (
        F.col("tombstone_since") + F.expr(f"INTERVAL {int(delete_retention_s)} SECONDS") <= F.lit(now)
    )
    return rows.where(~expired)


def retention_marks(rows: DataFrame, now: datetime, retention_s: int | None, retention_bytes: int | None) -> DataFrame:
    """`compact,delete`: mark (drop) a row older than `retention_s`, or one whose size, summed
    with every newer survivor's, exceeds `retention_bytes`. Either rule suffices."""
    if retention_s is not None:
        rows = rows.where(F.col("published_at") >= F.lit(now) - F.expr(f"INTERVAL {int(retention_s)} SECONDS"))
    if retention_bytes is not None:
        newest_first = Window.orderBy(F.col("published_at").desc(), F.col("segment").cast("int").desc(),
                                      F.col("offset").desc()).rowsBetween(Window.unboundedPreceding, Window.currentRow)
        rows = rows.withColumn("_total", F.sum("payload_size").over(newest_first))
        rows = rows.where(F.col("_total") <= F.lit(retention_bytes)).drop("_total")
    return rows


@dataclass(frozen=True)
class CompactionSettings:
    delete_retention_s: int
    retention_s: int | None = None  # compact,delete only
    retention_bytes: int | None = None


def compact(previous: DataFrame | None, events: DataFrame, now: datetime, settings: CompactionSettings) -> DataFrame:
    """The new view: the previous one followed by the new events, latest per key, tombstones
    through their lifecycle, then the retention marks."""
    rows = drop_keyless(as_view_rows(events))
    if previous is not None:
        rows = previous.select(*VIEW_COLUMNS).unionByName(rows)
    view = tombstone_lifecycle(latest_per_key(rows), now, settings.delete_retention_s)
    return retention_marks(view, now, settings.retention_s, settings.retention_bytes)


@dataclass
class CompactionStats:
    view: DataFrame
    events_in: int  # previous view rows + new events
    bytes_in: int
    keyless: int
    tombstones_dropped: int
    marked: int


def compact_with_stats(previous: DataFrame | None, events: DataFrame, now: datetime,
                       settings: CompactionSettings) -> CompactionStats:
    """`compact`, counting what each step dropped (the run's history record). The latest rows
    per key are cached for the counts and the write."""
    new_rows = as_view_rows(events)
    rows = drop_keyless(new_rows)
    if previous is not None:
        rows = previous.select(*VIEW_COLUMNS).unionByName(rows)
    latest = latest_per_key(rows).cache()
    alive = tombstone_lifecycle(latest, now, settings.delete_retention_s)
    view = retention_marks(alive, now, settings.retention_s, settings.retention_bytes)
    incoming = new_rows.agg(F.count(F.lit(1)).alias("n"), F.sum(F.col("key").isNull().cast("int")).alias("keyless"),
                            F.sum("payload_size").alias("bytes")).first()
    before = (previous.agg(F.count(F.lit(1)).alias("n"), F.sum("payload_size").alias("bytes")).first()
              if previous is not None else None)
    n_latest = latest.count()
    n_alive = alive.count()
    n_view = view.count()
    return CompactionStats(
        view=view,
        events_in=incoming["n"] + (before["n"] if before else 0),
        bytes_in=(incoming["bytes"] or 0) + ((before["bytes"] or 0) if before else 0),
        keyless=incoming["keyless"] or 0,
        tombstones_dropped=n_latest - n_alive,
        marked=n_alive - n_view,
    )


def summary(view: DataFrame) -> dict:
    """Rows, keys, tombstones and payload bytes of a written view."""
    row = view.agg(F.count(F.lit(1)).alias("rows"), F.countDistinct("key").alias("keys"),
                   F.sum((F.col("payload_size") == 0).cast("int")).alias("tombstones"),
                   F.sum("payload_size").alias("bytes")).first()
    return {"rows": row["rows"], "keys": row["keys"], "tombstones": row["tombstones"] or 0, "bytes": row["bytes"] or 0}
