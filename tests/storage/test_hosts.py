"""A store that processes of several hosts touch: the writer on one host, heads moved and chunks
deleted by another (a Spark executor). Each host is its own boot id and its own segment objects;
a host's crash is the loss of its writes that were not durable yet (restored bytes of the
`ends` file), since a crash of the machine itself cannot be had in a test."""

import contextlib
import os
import struct

import pytest

from domain.events import EventIn
from domain.segment_layout import Layout
from store import boot, framing
from store import store as store_module
from store.ends import ENDS_FILE, ENDS_SLOT, HEAD, HEAD_AT, TAIL, Tail
from store.segment import Segment, StoreConfig, move_heads
from store.store import SegmentStore, StreamLog, sync_store, truncate_many

HOST_A = b"host-a-boot-id.."
HOST_B = b"host-b-boot-id.."
CONFIG = StoreConfig(chunk_bytes=2048, index_interval_bytes=300)  # several index entries a chunk
IDS = ["0", "1"]


@contextlib.contextmanager
def on_host(boot_id):
    saved = boot.BOOT_ID
    boot.BOOT_ID = boot_id
    try:
        yield
    finally:
        boot.BOOT_ID = saved


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


def test_the_head_movers_crash_before_its_sync_loses_nothing(stream_dir, monkeypatch):
    writer = Host(HOST_A, stream_dir)
    ends = {s: 0 for s in IDS}
    for _ in range(6):
        for s in IDS:
            ends[s] = writer.append(s, ends[s], 10)
    heads = {s: slot_bytes(stream_dir, s, "head") for s in IDS}
    chunks = {s: writer.segments[s].chunk_bases() for s in IDS}

    def host_down(path):
        raise SystemExit("the host went down before its sync")

    monkeypatch.setattr(store_module, "sync_store", host_down)
    mover = StreamLog(stream_dir, Layout.fixed(len(IDS)), CONFIG)
    with on_host(HOST_B), pytest.raises(SystemExit):
        truncate_many([(mover, {"0": 33, "1": 47}, None)])  # chunks are behind these heads
    for s in IDS:
        assert slot_bytes(stream_dir, s, "head") != heads[s]  # moved, not durable
        lose(stream_dir, s, "head", heads[s])  # ... and lost with the host

    assert {s: writer.segments[s].chunk_bases() for s in IDS} == chunks  # nothing deleted before the sync
    for s in IDS:
        ends[s] = writer.append(s, ends[s], 5)
        assert writer.read_all(s) == [f"{s}:{i}" for i in range(ends[s])]  # back in view, all of it

    monkeypatch.undo()
    rebooted = Host(b"host-b-rebooted.", stream_dir)
    rebooted.delete_behind(rebooted.move_heads({"0": 33, "1": 47}))
    assert writer.read_all("0") == [f"0:{i}" for i in range(33, ends["0"])]
    assert writer.read_all("1") == [f"1:{i}" for i in range(47, ends["1"])]
    assert writer.segments["0"].chunk_bases()[0] > chunks["0"][0]  # deleted once synced


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


def test_a_tail_another_host_adopts_is_durable_so_its_crash_cannot_bring_back_the_writers_older_one(
    stream_dir, monkeypatch
):
    """Host B seals the writer's active chunk (the sealing task); B's host goes down at once, so
    only what B wrote durably is left of its tail writes. The writer, still on its boot, must not
    find its own older tail then (it would append into the sealed chunk, and reuse offsets)."""
    durable = []
    write = Segment._write_record

    def recorded(self, at, legacy_path, data, durable_write=False):
        if durable_write and at % ENDS_SLOT == 0:
            durable.append(data)
        return write(self, at, legacy_path, data, durable_write)

    monkeypatch.setattr(Segment, "_write_record", recorded)
    writer, sealer = Host(HOST_A, stream_dir), Host(HOST_B, stream_dir)
    end = writer.append("0", 0, 5)
    writers_tail = slot_bytes(stream_dir, "0", "tail")

    with on_host(HOST_B):
        sealed = sealer.segments["0"].roll_if_due(10**15)
    assert sealed is not None and len(writer.segments["0"].chunk_bases()) == 2
    lose(stream_dir, "0", "tail", durable[-1] if durable else writers_tail)  # B's host went down

    assert Tail.unpack(slot_bytes(stream_dir, "0", "tail")).boot_id == HOST_B
    end = writer.append("0", end, 3)
    assert writer.read_all("0") == [f"0:{i}" for i in range(end)]
    assert writer.segments["0"].committed_tail().active_base == 5  # in the new chunk
    writer.delete_behind(writer.move_heads({"0": 6}))
    assert writer.read_all("0") == [f"0:{i}" for i in range(6, end)]


def test_a_sealing_task_on_another_host_leaves_a_tail_alone_until_it_rolls(stream_dir):
    writer, sealer = Host(HOST_A, stream_dir), Host(HOST_B, stream_dir)
    writer.append("0", 0, 5)
    tail = slot_bytes(stream_dir, "0", "tail")
    with on_host(HOST_B):
        assert sealer.segments["0"].roll_if_due(0) is None  # nothing due
        assert sealer.segments["0"].create() == Tail.unpack(tail)
    assert slot_bytes(stream_dir, "0", "tail") == tail


@pytest.mark.parametrize("points_at", ["a later record", "the chunk's end"])
def test_a_stale_index_entry_never_makes_a_read_skip_records(stream_dir, points_at):
    writer = Host(HOST_A, stream_dir)
    end = writer.append("0", 0, 30)
    seg = writer.segments["0"]
    idx = seg.chunk_path(0, "idx")
    entries = bytearray(idx.read_bytes())
    assert len(entries) >= 32
    offset, _ = struct.unpack_from("<QQ", entries, 16)  # the second entry
    data = seg.chunk_path(0).read_bytes()
    at = {rec.offset: pos for pos, rec in framing.iter_records(data, framing.CHUNK_HEADER_SIZE)}
    stale = at[offset + 2] if points_at == "a later record" else len(data)
    struct.pack_into("<QQ", entries, 16, offset, stale)
    idx.write_bytes(bytes(entries))

    fresh = Segment(seg.path, CONFIG)
    assert [r.offset for r in fresh.read(offset, 5)] == list(range(offset, offset + 5))
    assert [r.offset for r in fresh.read(0, 100)] == list(range(end))
