"""A sealed chunk's Parquet copy, made where it is missing, and what it holds counted from it
(`store.parquet.copy_facts`, the unit of work of a compaction run's first Spark job), without
Spark."""

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq

from domain.events import EventIn
from store.parquet import SCHEMA, copy_facts
from store.segment import Segment, StoreConfig


def copy_of(path, keys, payloads, at):
    n = len(keys)
    table = pa.table(
        {
            "segment": ["0"] * n,
            "offset": list(range(n)),
            "published_at": at,
            "deliver_at": [None] * n,
            "cum_size": list(range(n)),
            "routing_key": [None] * n,
            "key": keys,
            "headers": [None] * n,
            "payload": payloads,
            "payload_size": [len(p) for p in payloads],
        },
        schema=SCHEMA,
    )
    pq.write_table(table, path, row_group_size=2)  # several row groups: statistics of each add up
    return path


def test_it_counts_events_keyless_ones_payload_bytes_and_the_newest_time_over_every_row_group(tmp_path):
    times = [datetime(2026, 11, 23, 0, 0, s, tzinfo=UTC) for s in (1, 2, 9, 3, 4)]
    copy_of(tmp_path / "7.parquet", [b"A", None, b"B", None, b"A"], [b"1", b"xy", b"", b"z", b"22"], times)
    facts = copy_facts({"chunk": str(tmp_path / "7.chunk"), "segment": "0"})
    assert facts == {
        "copy": str(tmp_path / "7.parquet"),
        "made": False,  # there already: read, not made again
        "events": 5,
        "keyless": 2,
        "bytes": 1 + 2 + 0 + 1 + 2,
        "newest_ms": int(times[2].timestamp() * 1000),
    }


def test_a_missing_copy_is_made_from_the_chunk_event_for_event(tmp_path):
    seg = Segment(tmp_path / "seg", StoreConfig(chunk_bytes=1 << 20))
    t0 = 1_764_000_000_000
    seg.append([EventIn(b"abc", key=b"k1"), EventIn(b"", key=b"k2")], now_ms=t0)
    seg.append([EventIn(b"defgh"), EventIn(b"ij", key=b"k1")], now_ms=t0 + 5)
    seg.roll_if_due(t0 + 10 * 86_400_000)
    (base,) = seg.sealed_chunks()
    task = {"chunk": str(seg.chunk_path(base)), "segment": "3"}

    first = copy_facts(task)
    again = copy_facts(task)

    assert first == {**again, "made": True} and again["made"] is False
    assert (first["events"], first["keyless"], first["bytes"], first["newest_ms"]) == (4, 1, 10, t0 + 5)
    rows = pq.read_table(first["copy"]).to_pylist()
    assert [(r["segment"], r["offset"], r["key"], r["payload"]) for r in rows] == [
        ("3", 0, b"k1", b"abc"),
        ("3", 1, b"k2", b""),
        ("3", 2, None, b"defgh"),
        ("3", 3, b"k1", b"ij"),
    ]
