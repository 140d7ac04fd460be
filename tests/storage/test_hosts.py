"""A store that processes of several hosts touch: the writer on one host, heads moved and chunks
deleted by another (a Spark executor). Each host is its own boot id and its own segment objects;
a host's crash is the loss of its writes that were not durable yet (restored bytes of the
`ends` file), since a crash of the machine itself cannot be had in a test."""

import contextlib
import os

import pytest

from domain.events import EventIn
from store import segment as segment_module
from store.segment import ENDS_FILE, ENDS_SLOT, HEAD, HEAD_AT, TAIL, Segment, StoreConfig, move_heads
from store.store import SegmentStore, sync_store

HOST_A = b"host-a-boot-id.."
HOST_B = b"host-b-boot-id.."
CONFIG = StoreConfig(chunk_bytes=2048)
IDS = ["0", "1"]


@contextlib.contextmanager
def on_host(boot_id):
    saved = segment_module.BOOT_ID
    segment_module.BOOT_ID = boot_id
    try:
        yield
    finally:
        segment_module.BOOT_ID = saved


@pytest.fixture
def scans(monkeypatch):
    """How many times a tail was recovered by scanning the whole active chunk, or past a tail."""
    seen = {"whole": 0, "past": 0}
    whole, past = Segment._recover_by_scan, Segment._recover_past

    def counted_whole(self):
        seen["whole"] += 1
        return whole(self)

    def counted_past(self, tail, size):
        seen["past"] += 1
        return past(self, tail, size)

    monkeypatch.setattr(Segment, "_recover_by_scan", counted_whole)
    monkeypatch.setattr(Segment, "_recover_past", counted_past)
    return seen


class Host:
    def __init__(self, boot_id, stream_dir):
        self.boot_id = boot_id
        self.dir = stream_dir
        self.segments = {s: Segment(stream_dir / s, CONFIG) for s in IDS}

    def append(self, seg, first, n):
        with on_host(self.boot_id):
            got = self.segments[seg].append([EventIn(f"{seg}:{first + i}".encode().ljust(60, b".")) for i in range(n)])
        assert got.first_offset == first
        return first + n

    def move_heads(self, cut, durable=False):
        with on_host(self.boot_id):
            return move_heads(self.dir, IDS, self.segments.__getitem__, cut, {}, durable)

    def delete_behind(self, moved):
        sync_store(self.dir)
        with on_host(self.boot_id):
            return {
                s: self.segments[s].delete_chunks_before_head(upto=after.offset) for s, (_, after, _) in moved.items()
            }

    def read_all(self, seg):
        with on_host(self.boot_id):
            return [r.payload.rstrip(b".").decode() for r in self.segments[seg].read(0, 10_000)]


def slot_bytes(stream_dir, seg, part):
    at, size = (0, TAIL.size) if part == "tail" else (HEAD_AT, HEAD.size)
    with open(stream_dir / ENDS_FILE, "rb") as f:
        f.seek(int(seg) * ENDS_SLOT + at)
        return f.read(size)


def lose(stream_dir, seg, part, old):
    """A crash took this write back: the slot holds what it held before."""
    at = 0 if part == "tail" else HEAD_AT
    fd = os.open(stream_dir / ENDS_FILE, os.O_WRONLY)
    try:
        os.pwrite(fd, old, int(seg) * ENDS_SLOT + at)
    finally:
        os.close(fd)


@pytest.fixture
def stream_dir(tmp_path):
    log = SegmentStore(tmp_path / "store", CONFIG).stream("s", len(IDS))
    return log.root


def test_a_head_moved_from_another_host_leaves_the_writers_tail_and_recovery_alone(stream_dir, scans):
    writer, mover = Host(HOST_A, stream_dir), Host(HOST_B, stream_dir)
    ends = {s: 0 for s in IDS}
    for _ in range(8):
        for s in IDS:
            ends[s] = writer.append(s, ends[s], 10)
    assert len(writer.segments["0"].chunk_bases()) > 2
    tails = {s: slot_bytes(stream_dir, s, "tail") for s in IDS}
    scans.update(whole=0, past=0)

    moved = mover.move_heads({"0": 35, "1": 52})
    deleted = mover.delete_behind(moved)

    assert {s: after.offset for s, (_, after, _) in moved.items()} == {"0": 35, "1": 52}
    assert sum(chunks for chunks, _ in deleted.values()) > 0
    assert {s: slot_bytes(stream_dir, s, "tail") for s in IDS} == tails  # still the writer's
    for s in IDS:
        ends[s] = writer.append(s, ends[s], 3)
    assert scans == {"whole": 0, "past": 0}

    # The writer's own recovery is as strict as before: bytes a dead writer of its host left past
    # the tail (an append never answered) are cut, not adopted as a foreign scan would adopt them.
    seg = writer.segments["0"]
    tail = seg.committed_tail()
    with on_host(HOST_A):
        dead = Segment(seg.path, CONFIG)
        dead.append([EventIn(b"never answered")])
    lose(stream_dir, "0", "tail", tail.pack())
    mover.move_heads({"0": 40})
    ends["0"] = writer.append("0", ends["0"], 1)
    assert writer.read_all("0") == [f"0:{i}" for i in range(40, ends["0"])]
    assert scans == {"whole": 0, "past": 0}


def test_the_head_movers_crash_before_its_sync_loses_nothing(stream_dir):
    writer, mover = Host(HOST_A, stream_dir), Host(HOST_B, stream_dir)
    ends = {s: 0 for s in IDS}
    for _ in range(6):
        for s in IDS:
            ends[s] = writer.append(s, ends[s], 10)
    heads = {s: slot_bytes(stream_dir, s, "head") for s in IDS}
    chunks = {s: writer.segments[s].chunk_bases() for s in IDS}

    mover.move_heads({"0": 33, "1": 47})  # not durable: its sync comes before any deletion
    for s in IDS:
        lose(stream_dir, s, "head", heads[s])  # ... and its host went down first

    assert {s: writer.segments[s].chunk_bases() for s in IDS} == chunks
    for s in IDS:
        ends[s] = writer.append(s, ends[s], 5)
        assert writer.read_all(s) == [f"{s}:{i}" for i in range(ends[s])]  # back in view, all of it

    rebooted = Host(b"host-b-rebooted.", stream_dir)
    rebooted.delete_behind(rebooted.move_heads({"0": 33, "1": 47}))
    assert writer.read_all("0") == [f"0:{i}" for i in range(33, ends["0"])]
    assert writer.read_all("1") == [f"1:{i}" for i in range(47, ends["1"])]


@pytest.mark.parametrize("lost", ["appends in the active chunk", "appends across a roll"])
def test_the_writers_crash_after_a_foreign_head_move_loses_no_acknowledged_event(stream_dir, scans, lost):
    writer, mover = Host(HOST_A, stream_dir), Host(HOST_B, stream_dir)
    seg = writer.segments["0"]
    end = writer.append("0", 0, 10)
    while len(seg.chunk_bases()) < 3 or seg.committed_tail().next_offset != seg.chunk_bases()[-1] + 5:
        end = writer.append("0", end, 5)  # until a chunk just began: room for one more batch
    stale = seg.committed_tail()
    old_tail = slot_bytes(stream_dir, "0", "tail")
    for _ in range(1 if lost == "appends in the active chunk" else 3):
        end = writer.append("0", end, 10)  # acknowledged
    same_chunk = seg.committed_tail().active_base == stale.active_base
    assert same_chunk == (lost == "appends in the active chunk")

    mover.delete_behind(mover.move_heads({"0": 12}))
    lose(stream_dir, "0", "tail", old_tail)  # the writer's host went down: its tail writes are lost

    # Another host moves the head into what only the lost tail covered: it recovers the tail
    # (the records were durable before any tail named them) instead of refusing the cut.
    cut = stale.next_offset + 1
    moved = mover.move_heads({"0": cut})
    assert moved["0"][1].offset == cut
    mover.delete_behind(moved)

    rebooted = Host(b"host-a-rebooted.", stream_dir)
    scans.update(whole=0, past=0)
    end = rebooted.append("0", end, 4)  # no offset reused, none skipped
    assert rebooted.read_all("0") == [f"0:{i}" for i in range(cut, end)]
    assert scans["whole"] == 0  # the mover's recovery left a tail to trust up to its end


def test_a_tail_from_another_host_is_checked_past_its_end_only(stream_dir, scans):
    writer, other = Host(HOST_A, stream_dir), Host(HOST_B, stream_dir)
    end = writer.append("0", 0, 10)
    stale = slot_bytes(stream_dir, "0", "tail")
    end = writer.append("0", end, 3)
    lose(stream_dir, "0", "tail", stale)  # durable records past the tail, as after a crash
    with open(writer.segments["0"].chunk_path(0), "ab") as f:
        f.write(b"\x07" * 13)  # and the torn end of a write that never finished
    scans.update(whole=0, past=0)

    end = other.append("0", end, 2)

    assert scans == {"whole": 0, "past": 1}
    assert other.read_all("0") == [f"0:{i}" for i in range(end)]
    tail = other.segments["0"].committed_tail()
    assert tail.boot_id == HOST_B and tail.committed_pos == os.path.getsize(other.segments["0"].chunk_path(0))
    assert writer.read_all("0") == other.read_all("0")


def test_chunks_are_deleted_only_behind_the_head_the_deleting_host_made_durable(stream_dir):
    writer = Host(HOST_A, stream_dir)
    end = 0
    for _ in range(12):
        end = writer.append("0", end, 10)
    first, second = Host(HOST_B, stream_dir), Host(b"host-c-boot-id..", stream_dir)
    bases = writer.segments["0"].chunk_bases()
    moved = first.move_heads({"0": 30})
    second.move_heads({"0": 100})  # further, from a third host that has not synced it yet
    first.delete_behind(moved)
    kept = writer.segments["0"].chunk_bases()
    assert kept == [b for b, nxt in zip(bases, bases[1:] + [end + 1]) if nxt > 30]
    assert kept[0] < 100 and kept != [b for b, nxt in zip(bases, bases[1:] + [end + 1]) if nxt > 100]
