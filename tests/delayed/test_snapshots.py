"""Snapshots of sealed buckets: written durably, read back exactly, corruption detected."""

import pytest

from domain.delayed import BucketIndex, DelayedConfig, Index
from store.delayed_snapshots import (
    CorruptSnapshot,
    delete_snapshot,
    read_metadata,
    read_snapshot,
    write_snapshot,
)


@pytest.fixture
def bucket():
    index = BucketIndex(
        DelayedConfig(min_index_count_per_bucket=100, max_time_step_per_segment=100, max_indexes_per_segment=4)
    )
    for i in range(10):
        index.add(Index(1000 + 30 * i, 3 + i // 5, i % 2, 100 + i), now=0)
    return index.seal()


def test_a_snapshot_reads_back_segment_for_segment(tmp_path, bucket):
    info = write_snapshot(tmp_path, "b1", bucket)
    assert info.count == 10 and info.parquet_bytes > 0
    back = read_snapshot(tmp_path, "b1")
    assert (back.first_chunk, back.last_chunk) == (bucket.first_chunk, bucket.last_chunk)
    assert [s.indexes for s in back.segments] == [s.indexes for s in bucket.segments]
    assert [dict(s.bitmaps) for s in back.segments] == [dict(s.bitmaps) for s in bucket.segments]
    meta, _ = read_metadata(tmp_path, "b1")
    assert [(s["min"], s["max"], s["count"]) for s in meta.segments] == [
        (s.min_time, s.max_time, len(s.indexes)) for s in bucket.segments
    ]


def test_recovery_skips_segments_already_due(tmp_path, bucket):
    write_snapshot(tmp_path, "b1", bucket)
    cut = bucket.segments[1].min_time  # the first segment lies wholly before it
    back = read_snapshot(tmp_path, "b1", skip_due_before=cut)
    assert [s.indexes for s in back.segments] == [s.indexes for s in bucket.segments[1:]]


@pytest.mark.parametrize("damage", ["flip", "truncate", "meta", "missing"])
def test_a_damaged_snapshot_is_refused_whole(tmp_path, bucket, damage):
    write_snapshot(tmp_path, "b1", bucket)
    data = tmp_path / "b1.parquet"
    if damage == "flip":
        raw = bytearray(data.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        data.write_bytes(bytes(raw))
    elif damage == "truncate":
        data.write_bytes(data.read_bytes()[:-10])
    elif damage == "meta":
        (tmp_path / "b1.json").write_bytes(b'{"format": 1, "first_')
    else:
        data.unlink()
    with pytest.raises(CorruptSnapshot):
        read_snapshot(tmp_path, "b1")


def test_deleting_removes_the_metadata_and_the_data(tmp_path, bucket):
    write_snapshot(tmp_path, "b1", bucket)
    delete_snapshot(tmp_path, "b1")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(CorruptSnapshot):
        read_snapshot(tmp_path, "b1")
