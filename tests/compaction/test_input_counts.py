"""What a run reads, counted from the sealed chunks' Parquet copies without Spark."""

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq

from compaction.runs import input_counts
from store.parquet import SCHEMA


def copy_of(path, keys, payloads):
    n = len(keys)
    at = datetime(2026, 11, 23, tzinfo=UTC)
    table = pa.table(
        {
            "segment": ["0"] * n,
            "offset": list(range(n)),
            "published_at": [at] * n,
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


def test_it_counts_events_keyless_ones_and_payload_bytes_over_every_copy(tmp_path):
    # given two copies, one with keyless events and a tombstone
    first = copy_of(tmp_path / "a.parquet", [b"A", None, b"B", None, b"A"], [b"1", b"xy", b"", b"z", b"22"])
    second = copy_of(tmp_path / "b.parquet", [b"C"], [b"333"])
    # when they are counted
    counts = input_counts([first, second])
    # then
    assert (counts.events, counts.keyless, counts.bytes) == (6, 2, 1 + 2 + 0 + 1 + 2 + 3)
