import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from domain.events import EventIn
from store import boot, framing
from store.segment import Segment, StoreConfig

WRITER = Path(__file__).with_name("writer_process.py")


def small(tmp_path, **kw) -> Segment:
    return Segment(tmp_path / "seg", StoreConfig(chunk_bytes=kw.pop("chunk_bytes", 2048), **kw))


def events(n, size=50, tag="e"):
    return [EventIn(f"{tag}{i}".encode().ljust(size, b".")) for i in range(n)]


def test_offsets_are_consecutive_across_appends_and_chunks(tmp_path):
    seg = small(tmp_path)
    firsts = [seg.append(events(10)).first_offset for _ in range(20)]
    assert firsts == list(range(0, 200, 10))
    assert len(seg.chunk_bases()) > 1
    assert [r.offset for r in seg.read(0, 1000)] == list(range(200))


def test_reads_start_anywhere_through_the_sparse_index(tmp_path):
    seg = small(tmp_path, chunk_bytes=50_000)
    for b in range(30):
        seg.append(events(40, tag=f"b{b}-"))
    for start in (0, 1, 399, 555, 1199):
        got = seg.read(start, 3)
        assert [r.offset for r in got] == list(range(start, min(start + 3, 1200)))
        assert got[0].payload.startswith(f"b{start // 40}-{start % 40}".encode())


def test_a_read_sized_by_the_index_gets_every_record_wanted_whatever_their_sizes(tmp_path):
    """A read of many records reads only as far as the index says they reach, then on if that
    falls short: every start and count gives the same records, with records larger than the
    4 KiB index interval and than the first block among them."""
    seg = small(tmp_path, chunk_bytes=400_000)
    sizes = [50, 3000, 9000, 10, 20_000, 100] * 20
    seg.append([EventIn(f"e{i}-".encode().ljust(n, b".")) for i, n in enumerate(sizes)])
    seg.append(events(500, tag="small-"))
    total = len(sizes) + 500
    for start in (0, 1, 4, 5, 37, 119, 120, 121, 400, 619):
        for count in (2, 7, 50, 1000):
            got = seg.read(start, count)
            assert [r.offset for r in got] == list(range(start, min(start + count, total)))
            for r in got:
                tag = f"e{r.offset}-" if r.offset < len(sizes) else f"small-{r.offset - len(sizes)}"
                assert r.payload.startswith(tag.encode())
            # and the same left as frames (a binary read's): the same records once decoded
            assert [f.record() for f in seg.read_frames(start, count)] == got


def test_size_till_is_cumulative_payload_bytes(tmp_path):
    seg = small(tmp_path)
    sizes = [7, 0, 100, 33]
    seg.append([EventIn(b"x" * n) for n in sizes])
    assert [seg.size_till(o) for o in range(5)] == [0, 7, 7, 107, 140]
    seg.truncate(2)
    assert seg.size_till(2) == 7 and seg.size_till(4) == 140  # does not shrink on truncation


def test_truncation_deletes_exactly_the_chunks_wholly_before_the_head(tmp_path):
    seg = small(tmp_path)
    for _ in range(12):
        seg.append(events(10))
    bases = seg.chunk_bases()
    assert len(bases) >= 4
    head = bases[2] + 1  # inside the third chunk
    result = seg.truncate(head)
    assert seg.chunk_bases() == bases[2:]
    assert result.chunks_deleted == 2
    assert result.head_after.offset == head
    assert [r.offset for r in seg.read(0, 2)] == [head, head + 1]  # nothing before the head
    # a target behind the head changes nothing
    again = seg.truncate(head - 1)
    assert again.head_after == again.head_before and again.chunks_deleted == 0


def test_a_read_given_ends_read_a_moment_earlier_is_the_read_of_that_moment(tmp_path):
    # given ends read, then more appended and the first chunks truncated away
    seg = small(tmp_path)
    for _ in range(12):
        seg.append(events(10))
    earlier = seg.ends()
    seg.append(events(10, tag="later"))
    bases = seg.chunk_bases()
    seg.truncate(bases[2] + 1)
    # when a read is given the earlier ends
    got = seg.read(0, 1000, ends=earlier)
    # then it stops at the earlier tail, and starts at the head as it is now (a read that meets
    # a truncation under it asks for the head again)
    assert [r.offset for r in got] == list(range(bases[2] + 1, 120))
    # and without them, it reads the segment as it is now
    assert [r.offset for r in seg.read(0, 1000)] == list(range(bases[2] + 1, 130))


def test_truncation_never_deletes_the_active_chunk(tmp_path):
    seg = small(tmp_path)
    seg.append(events(3))
    seg.truncate(3)
    assert seg.info().chunk_count == 1
    assert seg.read(0, 10) == []
    assert seg.append(events(1)).first_offset == 3


def test_a_crashed_writers_uncommitted_bytes_are_cut(tmp_path):
    seg = small(tmp_path, chunk_bytes=1 << 20)
    seg.append(events(5))
    tail = seg.committed_tail()
    data, _, _ = framing.encode_batch(events(3), 5, tail.cum_size, 0)
    with open(seg.chunk_path(tail.active_base), "ab") as f:  # written, never committed
        f.write(data)
    fresh = Segment(seg.path, seg.config)
    assert fresh.append(events(1)).first_offset == 5
    assert [r.offset for r in fresh.read(0, 100)] == list(range(6))


def test_after_a_reboot_recovery_scans_and_cuts_a_torn_tail(tmp_path):
    seg = small(tmp_path, chunk_bytes=1 << 20)
    seg.append(events(4))
    seg.append(events(4))
    path = seg.chunk_path(0)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 5)  # the second batch is torn
    (seg.path / "tail").unlink()  # as if the machine restarted before the tail reached disk
    fresh = Segment(seg.path, seg.config)
    assert fresh.committed_tail().next_offset == 4
    assert fresh.append(events(1)).first_offset == 4
    assert len(fresh.read(0, 100)) == 5


def test_a_tail_from_another_boot_is_checked_past_its_end_and_garbage_there_is_cut(tmp_path, monkeypatch):
    seg = small(tmp_path, chunk_bytes=1 << 20)
    seg.append(events(4))
    with open(seg.chunk_path(0), "ab") as f:
        f.write(b"\x07" * 11)  # garbage that a lost page could leave
    monkeypatch.setattr(boot, "BOOT_ID", b"another-boot-id!")
    fresh = Segment(seg.path, seg.config)
    assert fresh.append(events(1)).first_offset == 4
    assert [r.offset for r in fresh.read(0, 10)] == [0, 1, 2, 3, 4]


def test_a_half_made_chunk_from_an_interrupted_roll_is_removed(tmp_path):
    seg = small(tmp_path, chunk_bytes=1 << 20)
    seg.append(events(4))
    (seg.path / "00000000000000000004.chunk").write_bytes(b"CBRC")  # torn header
    (seg.path / "tail").unlink()
    fresh = Segment(seg.path, seg.config)
    assert fresh.append(events(1)).first_offset == 4
    assert fresh.chunk_bases() == [0]


def test_chunks_roll_by_age(tmp_path):
    seg = small(tmp_path, chunk_bytes=1 << 20, chunk_seconds=60)
    t0 = 1_700_000_000_000
    seg.append(events(2), now_ms=t0)
    seg.append(events(2), now_ms=t0 + 30_000)
    assert seg.chunk_bases() == [0]
    seg.append(events(2), now_ms=t0 + 61_000)
    assert seg.chunk_bases() == [0, 4]


@pytest.mark.parametrize("mode", ["always", "never"])
def test_every_fsync_mode_writes_the_same_log(tmp_path, mode):
    seg = small(tmp_path, fsync=mode)
    seg.append(events(3))
    seg.append(events(2))
    assert [r.offset for r in seg.read(0, 10)] == [0, 1, 2, 3, 4]


def _run_writer(path, batches, per_batch, tag):
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(path), str(batches), str(per_batch), tag],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_two_processes_appending_to_one_segment_get_gap_free_unique_offsets(tmp_path):
    path = tmp_path / "seg"
    procs = [_run_writer(path, 60, 7, tag) for tag in ("A", "B")]
    acked = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        acked += [tuple(map(int, line.split()[1:])) for line in out.splitlines()]
    seg = Segment(path, StoreConfig(chunk_bytes=64 * 1024))
    records = seg.read(0, 10_000)
    assert [r.offset for r in records] == list(range(2 * 60 * 7))
    # every batch landed whole and contiguous, at the offsets its writer was told
    for first, count in acked:
        tags = {records[o].headers["w"] for o in range(first, first + count)}
        assert len(tags) == 1
    assert sorted(f for f, _ in acked) == list(range(0, 840, 7))


def test_kill_9_mid_append_loses_no_acknowledged_record(tmp_path):
    path = tmp_path / "seg"
    proc = _run_writer(path, 100_000, 50, "K")
    acked = []
    deadline = time.monotonic() + 30
    while len(acked) < 40 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("ack"):
            acked.append(tuple(map(int, line.split()[1:])))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # anything printed before the kill was acknowledged
    acked += [tuple(map(int, l.split()[1:])) for l in proc.stdout.read().splitlines() if l.startswith("ack")]
    assert len(acked) >= 40
    seg = Segment(path, StoreConfig(chunk_bytes=64 * 1024))
    last_acked = max(f + c for f, c in acked)
    tail = seg.append([EventIn(b"after")]).first_offset
    assert tail >= last_acked
    records = seg.read(0, tail + 1)
    assert [r.offset for r in records] == list(range(tail + 1))
    assert records[-1].payload == b"after"
    assert all(r.payload.startswith(b"K-") for r in records[:-1])


def test_a_reader_never_trusts_index_entries_of_a_write_that_recovery_cut(tmp_path):
    # given a committed batch, then a crashed writer's big records and their index entries
    cfg = StoreConfig(chunk_bytes=1 << 20, index_interval_bytes=256)
    writer = Segment(tmp_path / "seg", cfg)
    writer.append(events(5, size=300))
    tail = writer.committed_tail()
    data, rel, _ = framing.encode_batch(events(6, size=700), 5, tail.cum_size, 0)
    with open(writer.chunk_path(0), "ab") as f:
        f.write(data)
    with open(writer.chunk_path(0, "idx"), "ab") as f:
        for k, r in enumerate(rel):
            f.write(struct.pack("<QQ", 5 + k, tail.committed_pos + r))
    reader = Segment(writer.path, cfg)
    assert [r.offset for r in reader.read(0, 100)] == [0, 1, 2, 3, 4]  # reader has loaded the index

    # when another writer recovers and lays out small records where the big ones were
    Segment(writer.path, cfg).append(events(40, size=20, tag="new"))

    # then the reader finds them at their true positions, also where the cut entries pointed
    for start in (6, 8, 10, 30):
        got = reader.read(start, 3)
        assert [r.offset for r in got] == [start, start + 1, start + 2]
        assert got[0].payload.startswith(f"new{start - 5}".encode())


def test_a_writer_never_writes_through_a_descriptor_of_a_replaced_chunk(tmp_path):
    cfg = StoreConfig(chunk_bytes=1 << 20)
    a = Segment(tmp_path / "seg", cfg)
    a.append(events(3, tag="old"))  # a now holds a descriptor of chunk 0
    shutil.rmtree(a.path)  # the segment is deleted and made again elsewhere
    b = Segment(a.path, cfg)
    b.append(events(2, tag="b"))
    a.append(events(2, tag="a"))
    got = Segment(a.path, cfg).read(0, 10)
    assert [r.payload[:2] for r in got] == [b"b0", b"b1", b"a0", b"a1"]


def test_reads_sized_by_the_index_agree_with_record_by_record_reads_after_a_head_moved_mid_chunk(tmp_path):
    """Review of d75a425: with the head truncated to the middle of a sealed chunk, and reads that
    end exactly at, just before or just after an index entry, across sealed chunks into the active
    one, every read returns the records one-at-a-time reads return."""
    rng = random.Random(7)
    seg = small(tmp_path, chunk_bytes=60_000)
    for b in range(40):
        seg.append(
            [
                EventIn(f"x{b}-{i}-".encode().ljust(rng.choice((5, 90, 700, 5000, 13_000)), b"."))
                for i in range(rng.randint(1, 12))
            ]
        )
    total = seg.committed_tail().next_offset
    single = {o: seg.read(o, 1)[0] for o in range(total)}
    seg.truncate(total // 3 + 1)  # a head in the middle of a chunk, earlier chunks deleted
    head = seg.read_head().offset
    assert len(seg.chunk_bases()) > 2 and head not in seg.chunk_bases()
    offsets = [o for base in seg.chunk_bases() for o in seg._index(base, None)[0]]
    assert len(offsets) > 20
    starts = sorted({head, head + 1, total - 1, *(o + d for o in offsets for d in (-1, 0, 1) if head <= o + d < total)})
    for start in starts[::3]:
        for count in (2, 3, 17, 64, 400):
            got = seg.read(start, count)
            assert [r.offset for r in got] == list(range(start, min(start + count, total)))
            assert all(r == single[r.offset] for r in got)
    for o in offsets:  # a read ending exactly at an index entry
        for start in (o - 5, o - 1):
            if start >= head:
                got = seg.read(start, o - start)
                assert [r.offset for r in got] == list(range(start, o))


def test_a_chunk_read_by_short_preads_reads_on_to_what_was_asked(tmp_path, monkeypatch):
    # given a segment of events, and a pread that gives at most 7 bytes at a time (as pread may)
    seg = Segment(tmp_path / "seg", StoreConfig(fsync="never"))
    seg.append([EventIn(f"event {i}".encode()) for i in range(50)])
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, at: real(fd, min(n, 7), at))

    # when it is read, as records and as frames
    records, frames = seg.read(0, 100), seg.read_frames(0, 100)

    # then every event is there, as if each read had given all it was asked for
    assert [r.payload for r in records] == [f"event {i}".encode() for i in range(50)]
    assert [f.offset for f in frames] == list(range(50)) and frames[-1].record().payload == b"event 49"


def test_a_read_in_the_active_chunk_does_not_list_the_segments_chunks(tmp_path, monkeypatch):
    # given a segment of many sealed chunks and an active one
    seg = small(tmp_path, chunk_bytes=1024)
    for _ in range(30):
        seg.append(events(8, size=40))
    bases = seg.chunk_bases()
    active = seg.committed_tail().active_base
    assert len(bases) > 10 and bases[-1] == active
    listed = []
    real = os.listdir
    monkeypatch.setattr(os, "listdir", lambda path: listed.append(path) or real(path))

    # when a consumer that keeps up reads what the active chunk holds
    got = seg.read_frames(active, 1000)

    # then it reads every event there without listing the directory
    assert [f.offset for f in got] == list(range(active, 240)) and listed == []
    # and a read from further back still walks the sealed chunks into the active one
    assert [r.offset for r in seg.read(bases[2], 1000)] == list(range(bases[2], 240))
    assert listed
