"""The stream's `ends` file: every segment's head and tail in one CRC-checked slot per segment,
read in one go by `StreamLog.ends`. What it says must be what each segment says on its own, after
appends, rolls, truncations and crashes between the steps; an older store (per-segment `head`
and `tail` files) is read as it is and moves into the slots as it is written."""

import os
import shutil

from domain.events import EventIn
from store.ends import ENDS_FILE, ENDS_SLOT, HEAD_AT, read_stream_ends
from store.segment import StoreConfig
from store.store import SegmentStore, truncate_many


def events(n, size=40):
    return [EventIn(f"e{i}".encode().ljust(size, b".")) for i in range(n)]


def stream(tmp_path, key="s", segments=3):
    return SegmentStore(tmp_path / "store", StoreConfig(chunk_bytes=2048)).stream(key, segments)


def one_by_one(log):
    """What each segment says, each from its own reads."""
    return {s: (log.segment(s).read_head(), log.segment(s).committed_tail()) for s in log.segment_ids}


def assert_slots_agree(log):
    slots = read_stream_ends(log.root, log.segment_ids)
    assert slots == one_by_one(log)  # every slot valid, and the same as the segments' own reads
    assert log.ends() == one_by_one(log)


def test_slots_follow_appends_rolls_and_truncations(tmp_path):
    log = stream(tmp_path)
    for _ in range(6):
        for k, seg in enumerate(log.segment_ids):
            log.segment(seg).append(events(7 * (k + 1)))
        assert_slots_agree(log)
    assert len(log.segment("2").chunk_bases()) > 1  # rolled: the tail names a later chunk
    truncate_many([(log, {"0": 10, "1": 30, "2": 100}, None)])
    assert_slots_agree(log)
    SegmentStore(tmp_path / "store").sync()
    log.truncate({"0": 40, "1": 30, "2": 120})
    assert_slots_agree(log)
    assert {s: h.offset for s, (h, _) in log.ends().items()} == {"0": 40, "1": 30, "2": 120}


def test_segments_with_slots_make_no_head_or_tail_files(tmp_path):
    log = stream(tmp_path, segments=2)
    for seg in log.segment_ids:
        log.segment(seg).append(events(3))
    log.truncate({"0": 1, "1": 2})
    assert sorted(os.listdir(log.root)) == ["0", "1", ENDS_FILE]
    for seg in log.segment_ids:
        names = set(os.listdir(log.root / seg))
        assert not names & {"head", "tail"}
    assert os.path.getsize(log.root / ENDS_FILE) <= 2 * ENDS_SLOT


def test_a_segment_never_written_reads_as_empty_beside_written_ones(tmp_path):
    log = stream(tmp_path, segments=3)
    log.segment("2").append(events(5))  # slots 0 and 1 are zeros in the file
    ends = log.ends()
    assert ends["2"][1].next_offset == 5
    assert ends["0"][0].offset == 0 and ends["0"][1].next_offset == 0
    assert log.ends() == one_by_one(log)


def test_an_older_store_with_head_and_tail_files_is_read_then_moves_into_the_slots(tmp_path):
    log = stream(tmp_path, segments=2)
    for seg in log.segment_ids:
        log.segment(seg).append(events(20))
    log.truncate({"0": 5, "1": 7})
    want = one_by_one(log)
    # the same segments as a store made before the ends file kept them
    data = (log.root / ENDS_FILE).read_bytes()
    for seg in log.segment_ids:
        at = int(seg) * ENDS_SLOT
        (log.root / seg / "tail").write_bytes(data[at : at + 76])
        (log.root / seg / "head").write_bytes(data[at + HEAD_AT : at + HEAD_AT + 28])
    os.unlink(log.root / ENDS_FILE)
    old = SegmentStore(tmp_path / "store", StoreConfig(chunk_bytes=2048)).stream("s", 2)
    assert old.ends() == want
    assert old.segment("0").append(events(1)).first_offset == 20
    truncate_many([(old, {"0": 9, "1": 7}, None)])
    slots = read_stream_ends(old.root, old.segment_ids)
    assert slots["0"][1].next_offset == 21 and slots["0"][0].offset == 9  # now in the slot
    assert slots["1"] == (None, None)  # never written since: still read from its own files
    assert old.ends()["1"] == want["1"]


def test_a_torn_head_slot_falls_back_to_the_first_chunk(tmp_path):
    log = stream(tmp_path, segments=2)
    for _ in range(10):
        log.segment("1").append(events(20))
    seg = log.segment("1")
    seg.truncate(120)
    first = seg.chunk_bases()[0]
    assert 0 < first <= 120
    with open(log.root / ENDS_FILE, "r+b") as f:  # what a crash before the sync can leave
        f.seek(ENDS_SLOT + HEAD_AT + 9)
        f.write(b"\xff\xff")
    assert read_stream_ends(log.root, log.segment_ids)["1"][0] is None
    head = log.ends()["1"][0]
    assert head.offset == first and head.cum_size == seg.size_till(first)
    assert seg.read(0, 1)[0].offset == first


def test_a_lost_tail_slot_is_rebuilt_by_scanning_the_chunks(tmp_path):
    log = stream(tmp_path, segments=2)
    for _ in range(5):
        log.segment("0").append(events(20))
    want = log.segment("0").committed_tail()
    with open(log.root / ENDS_FILE, "r+b") as f:  # as if the tail's page never reached disk
        f.seek(0)
        f.write(b"\0" * 76)
    fresh = SegmentStore(tmp_path / "store", StoreConfig(chunk_bytes=2048)).stream("s", 2)
    tail = fresh.ends()["0"][1]
    assert (tail.next_offset, tail.cum_size, tail.active_base) == (want.next_offset, want.cum_size, want.active_base)
    assert fresh.segment("0").append(events(1)).first_offset == 100
    assert_slots_agree(fresh)


def test_a_copied_store_keeps_its_ends(tmp_path):
    log = stream(tmp_path, segments=2)
    for seg in log.segment_ids:
        log.segment(seg).append(events(9))
    log.truncate({"0": 4, "1": 2})
    shutil.copytree(tmp_path / "store", tmp_path / "copy")
    copy = SegmentStore(tmp_path / "copy", StoreConfig(chunk_bytes=2048)).stream("s", 2)
    assert copy.ends() == log.ends()
