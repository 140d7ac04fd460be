"""The segment store on a full disk (a real, small tmpfs): an append that does not fit raises
StorageFull, commits nothing and leaves no bytes behind; every append that returned stays whole
and readable; once space is freed (a truncation, or a bigger filesystem) appends go on at the
next offset."""

import errno
import random

import pytest
import tiny_disk

from domain.events import EventIn
from store import framing
from store.segment import Segment, StorageFull, StoreConfig
from store.segment.append import JOIN_AT_MOST

if not tiny_disk.is_root() and not tiny_disk.can_unshare():
    pytest.skip("needs root or user namespaces to mount a tmpfs", allow_module_level=True)


def on_tiny_disk(tmp_path, size, scenario):
    disk = tmp_path / "disk"
    if tiny_disk.is_root():
        with tiny_disk.tmpfs(disk, size):
            scenario(disk)
    else:
        tiny_disk.run_in_namespace(disk, size, "storage.test_disk_full", scenario.__name__)


def fill_until_full(seg: Segment, rng: random.Random) -> tuple[dict[int, bytes], StorageFull]:
    """Append batches of varied sizes until the disk refuses one; returns what was acknowledged."""
    acked: dict[int, bytes] = {}
    for b in range(100_000):
        batch = [f"{b}-{i}-".encode() + rng.randbytes(rng.randrange(10, 5000)) for i in range(rng.randrange(1, 8))]
        try:
            first = seg.append([EventIn(p) for p in batch]).first_offset
        except StorageFull as full:
            return acked, full
        acked.update({first + i: p for i, p in enumerate(batch)})
    raise AssertionError("the disk never filled")


def assert_log_is(seg: Segment, acked: dict[int, bytes], head: int = 0) -> None:
    got = seg.read(0, 1_000_000)
    assert [r.offset for r in got] == [o for o in sorted(acked) if o >= head]
    assert all(r.payload == acked[r.offset] for r in got)


def refused_append_leaves_nothing(disk):
    seg = Segment(disk / "seg", StoreConfig(chunk_bytes=64 * 1024))
    rng = random.Random(5)
    acked, full = fill_until_full(seg, rng)
    assert full.errno == errno.ENOSPC and "no space left" in str(full)
    tail = seg.committed_tail()
    assert tail.next_offset == len(acked) > 20
    assert seg.chunk_path(tail.active_base).stat().st_size == tail.committed_pos  # cut back
    free = tiny_disk.free_bytes(disk)
    for size in (60_000, 9_000, 4_000):  # more refusals give the space they took back each time
        with pytest.raises(StorageFull):
            seg.append([EventIn(b"y" * size)] * 3)
        assert tiny_disk.free_bytes(disk) == free
    assert_log_is(seg, acked)
    assert_log_is(Segment(seg.path, seg.config), acked)  # another process's view: the same

    # a truncation frees whole chunks: appends go on at the next offset
    head = seg.chunk_bases()[2]
    seg.truncate(head)
    first = seg.append([EventIn(b"after truncation")]).first_offset
    assert first == len(acked)
    acked[first] = b"after truncation"
    assert_log_is(Segment(seg.path, seg.config), acked, head)


def test_a_refused_append_commits_nothing_and_frees_what_it_wrote(tmp_path):
    on_tiny_disk(tmp_path, "512k", refused_append_leaves_nothing)


def full_disk_then_more_space(disk):
    seg = Segment(disk / "seg", StoreConfig(chunk_bytes=32 * 1024, fsync="always"))
    acked, _ = fill_until_full(seg, random.Random(9))
    tiny_disk.remount(disk, "2m")
    more = seg.append([EventIn(b"x" * 1000)] * 50)
    assert more.first_offset == len(acked)
    acked.update({more.first_offset + i: b"x" * 1000 for i in range(50)})
    assert_log_is(Segment(seg.path, seg.config), acked)


def test_with_more_space_the_log_goes_on_whole(tmp_path):
    on_tiny_disk(tmp_path, "256k", full_disk_then_more_space)


def a_roll_on_a_full_disk_leaves_no_half_chunk(disk):
    seg = Segment(disk / "seg", StoreConfig(chunk_bytes=1024))
    acked, _ = fill_until_full(seg, random.Random(3))
    assert not [p.name for p in seg.path.iterdir() if p.name.endswith(".tmp")]
    assert_log_is(Segment(seg.path, seg.config), acked)


def test_a_roll_on_a_full_disk_leaves_no_half_made_chunk(tmp_path):
    on_tiny_disk(tmp_path, "128k", a_roll_on_a_full_disk_leaves_no_half_chunk)


def large_batches_written_from_their_parts(disk):
    # batches framed larger than JOIN_AT_MOST are written from their parts (pwritev), payloads of
    # COPY_BELOW and more straight from where they are; one of over IOV_MAX parts takes several calls
    seg = Segment(disk / "seg", StoreConfig(chunk_bytes=64 * 1024 * 1024))
    rng = random.Random(11)
    acked: dict[int, bytes] = {}
    batches = [
        [rng.randbytes(framing.COPY_BELOW) for _ in range(300)],  # 900 parts, 1.2 MiB
        [rng.randbytes(2000) for _ in range(700)],
    ]  # 1 400 parts: two pwritev calls
    for batch in batches:
        assert sum(map(len, batch)) > JOIN_AT_MOST
        first = seg.append([EventIn(p) for p in batch]).first_offset
        acked.update({first + i: p for i, p in enumerate(batch)})
    assert_log_is(Segment(seg.path, seg.config), acked)
    # the next does not fit: it meets the full disk part-way through its parts and leaves nothing
    free = tiny_disk.free_bytes(disk)
    with pytest.raises(StorageFull):
        seg.append([EventIn(rng.randbytes(8000)) for _ in range(200)])
    tail = seg.committed_tail()
    assert tail.next_offset == len(acked)
    assert seg.chunk_path(tail.active_base).stat().st_size == tail.committed_pos
    assert tiny_disk.free_bytes(disk) == free
    assert_log_is(Segment(seg.path, seg.config), acked)


def test_a_large_batch_is_written_from_its_parts_whole_or_not_at_all(tmp_path):
    on_tiny_disk(tmp_path, "3m", large_batches_written_from_their_parts)
