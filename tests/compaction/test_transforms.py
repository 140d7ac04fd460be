"""The compactor's transforms on a local SparkSession: docs/design/compaction.md's worked examples, and random
keyed logs against a straightforward Python model of the view."""

import random
from datetime import UTC, datetime, timedelta

import pyarrow.parquet as pq
import pytest

from spark_tasks.compaction_job import CompactionSettings, compact, compact_with_stats, in_key_order, retention_marks

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 22, tzinfo=UTC)
SCHEMA = (
    "segment string, offset bigint, published_at timestamp, key binary, payload binary, payload_size bigint, "
    "routing_key binary, headers map<string,string>"
)


def events(spark, rows):
    """(segment, offset, key, value or None for a tombstone, seconds after T0, size?)."""
    data = []
    for seg, offset, key, value, at, *size in rows:
        payload = b"" if value is None else value.encode()
        data.append(
            (
                seg,
                offset,
                T0 + timedelta(seconds=at),
                None if key is None else key.encode(),
                payload,
                size[0] if size else len(payload),
                None,
                None,
            )
        )
    return spark.createDataFrame(data, SCHEMA)


def view_of(frame):
    return {r.key.decode(): (r.payload.decode() or None) for r in frame.collect()}


def test_compact_keeps_the_latest_per_key_and_a_tombstone_through_delete_retention(spark):
    settings = CompactionSettings(delete_retention_s=100)
    first = events(
        spark,
        [
            ("0", 0, "A", "1", 0),
            ("0", 1, "B", "1", 1),
            ("0", 2, "A", "2", 2),
            ("0", 3, "C", "1", 3),
            ("0", 4, "B", None, 4),
        ],
    )
    view = compact(None, first, T0 + timedelta(seconds=10), settings).cache()
    assert view_of(view) == {"A": "2", "C": "1", "B": None}  # D is on the live log only
    second = events(spark, [("0", 5, "D", "1", 5)])
    later = compact(view, second, T0 + timedelta(seconds=200), settings)
    assert view_of(later) == {"A": "2", "C": "1", "D": "1"}  # the tombstone's time has passed


def test_a_tombstone_is_kept_through_at_least_one_run_even_with_no_delete_retention(spark):
    settings = CompactionSettings(delete_retention_s=0)
    view = compact(
        None, events(spark, [("0", 0, "A", "1", 0), ("0", 1, "A", None, 1)]), T0 + timedelta(seconds=10), settings
    ).cache()
    assert view_of(view) == {"A": None}
    assert view_of(compact(view, events(spark, []), T0 + timedelta(seconds=11), settings)) == {}


@pytest.mark.parametrize(
    "rule, expected",
    [({"retention_s": 3600}, {"k3"}), ({"retention_bytes": 2048}, {"k3"}), ({"retention_bytes": 3072}, {"k2", "k3"})],
)
def test_compacted_retention_marks_by_time_or_by_size_newest_first(spark, rule, expected):
    ten = 10 * 3600
    view = events(
        spark,
        [("0", 0, "k1", "x", ten, 1024), ("0", 1, "k2", "y", ten + 1800, 2048), ("0", 2, "k3", "z", ten + 6600, 1024)],
    )
    noon = T0 + timedelta(hours=12)
    kept = retention_marks(view, noon, rule.get("retention_s"), rule.get("retention_bytes"))
    assert {r.key.decode() for r in kept.collect()} == expected


def model(log, now_s, delete_retention_s, retention_s=None, retention_bytes=None, runs=()):
    """The view by hand: latest per key by (time, segment, offset), tombstones kept from the run
    that first kept them for delete_retention_s, then the retention marks."""
    latest = {}
    for seg, offset, key, value, at in log:
        if key is not None and (key not in latest or (at, int(seg), offset) > latest[key][0]):
            latest[key] = ((at, int(seg), offset), value)
    view = {}
    for key, ((at, seg, offset), value) in latest.items():
        if value is None:
            first_kept = min(r for r in runs if r > at)  # the first run after the tombstone
            if first_kept < now_s and first_kept + delete_retention_s <= now_s:
                continue
        if retention_s is not None and at < now_s - retention_s:
            continue
        view[key] = ((at, seg, offset), value)
    if retention_bytes is not None:
        total, kept = 0, {}
        for key, (pos, value) in sorted(view.items(), key=lambda kv: kv[1][0], reverse=True):
            total += len(value or "")
            if total <= retention_bytes:
                kept[key] = (pos, value)
        view = kept
    return {k: v for k, (_, v) in view.items()}


@pytest.mark.parametrize("seed, broadcast", [(seed, True) for seed in range(6)] + [(0, False), (1, False)])
def test_random_keyed_logs_compact_to_the_models_view(spark, seed, broadcast):
    rng = random.Random(seed)
    log, offsets, at = [], {"0": 0, "1": 0, "2": 0}, 0
    for _ in range(rng.randrange(50, 300)):
        seg = rng.choice("012")
        key = rng.choice([None] + [f"k{i}" for i in range(rng.randrange(3, 40))])
        value = None if rng.random() < 0.15 else "v" * rng.randrange(1, 30)
        at += rng.randrange(0, 3)
        log.append((seg, offsets[seg], key, value, at))
        offsets[seg] += 1
    settings = CompactionSettings(
        delete_retention_s=rng.choice([0, 50, 10_000]),
        retention_s=rng.choice([None, 200, 5000]),
        retention_bytes=rng.choice([None, 100, 10_000]),
        broadcast_winners=broadcast,
    )
    cut = len(log) // 2
    runs = [log[cut - 1][4] + 1, at + 5]  # each run after the events it compacts
    view = compact(None, events(spark, log[:cut]), T0 + timedelta(seconds=runs[0]), settings).cache()
    later = compact(view, events(spark, log[cut:]), T0 + timedelta(seconds=runs[1]), settings)
    expected = model(
        log,
        runs[1],
        settings.delete_retention_s,
        settings.retention_s,
        settings.retention_bytes,
        runs=[r for r in runs],
    )
    assert view_of(later) == expected


def test_a_runs_counts_are_observed_while_its_view_is_written_in_key_ordered_files(spark, tmp_path):
    # given a view A=1 B=∅ (the tombstone kept from the run at 10) and new events after it
    settings = CompactionSettings(delete_retention_s=100, retention_s=150)
    first = events(spark, [("0", 0, "A", "1", 0), ("0", 1, "B", "1", 1), ("0", 2, "B", None, 2)])
    previous = compact(None, first, T0 + timedelta(seconds=10), settings).cache()
    new = events(
        spark,
        [("0", 3, None, "xx", 60), ("0", 4, "C", "333", 61), ("0", 5, "D", "4444", 62), ("0", 6, "E", None, 63)]
        + [("1", i, f"k{i:03d}", None, 64) for i in range(40)],
    )
    # when the run's view is written (every aggregation partition a file of its own)
    result = compact_with_stats(previous, new, T0 + timedelta(seconds=200), settings)
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    try:
        in_key_order(result.view).write.parquet(str(tmp_path / "gen"))
    finally:
        spark.conf.unset("spark.sql.adaptive.coalescePartitions.enabled")
    stats = result.stats()
    # then B's time has passed, A (older than 150 s) is marked, the keyless event is left out
    assert (stats.tombstones_dropped, stats.marked) == (1, 1)
    assert (stats.rows, stats.tombstones, stats.bytes) == (43, 41, 7)
    files = sorted((tmp_path / "gen").glob("*.parquet"))
    keys = [pq.read_table(f, columns=["key"]).column("key").to_pylist() for f in files]
    assert len(files) > 1 and all(k == sorted(k) for k in keys)
    assert sorted(k.decode() for ks in keys for k in ks) == ["C", "D", "E"] + [f"k{i:03d}" for i in range(40)]
