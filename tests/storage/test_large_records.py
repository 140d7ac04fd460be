"""A large event in the segment store (store/large.py): spooled, appended as one record flagged
large, passed over by the read path (its head decoded, its payload not), read by range, its CRC
checked when read whole, kept or cut by recovery as any record."""

import io
import os
import random
import struct

import pytest

from domain.events import EventIn
from store import framing
from store.large import PIECE_BYTES, BodyCutOff, BodyTooLarge, spool
from store.segment import Segment, StoreConfig
from store.segment.errors import CorruptSegment
from store.segment.reads import NotLarge


def _seg(tmp_path, **kw) -> Segment:
    return Segment(tmp_path / "seg", StoreConfig(chunk_bytes=kw.pop("chunk_bytes", 64 * 1024), **kw))


def _spooled(tmp_path, data: bytes, size: int | None = None, cap: int = 1 << 30):
    return spool(io.BytesIO(data).read, len(data) if size is None else size, tmp_path / "spool", cap)


def _payload(n: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(n)


def _read_all(large) -> bytes:
    try:
        return b"".join(large.pieces())
    finally:
        large.close()


@pytest.mark.parametrize("fsync", ["batch", "always", "never"])
def test_a_large_event_is_one_record_whose_payload_reads_pass_over(tmp_path, fsync):
    seg = _seg(tmp_path, fsync=fsync)
    seg.append([EventIn(b"before")])
    big = _payload(3 * PIECE_BYTES + 17)
    spooled = _spooled(tmp_path, big)
    first = seg.append([EventIn(spooled, b"rk", b"k", {"h": "v"}, None)]).first_offset
    seg.append([EventIn(b"after")])
    assert first == 1

    got = seg.read(0, 10)
    assert [r.offset for r in got] == [0, 1, 2]
    assert [r.payload for r in got] == [b"before", b"", b"after"]
    assert [r.large_size for r in got] == [None, len(big), None]
    assert (got[1].routing_key, got[1].key, got[1].headers) == (b"rk", b"k", {"h": "v"})
    assert got[2].cum_size == len(b"before") + len(big)  # its bytes count as any payload's
    frames = seg.read_frames(0, 10)
    assert type(frames[1]) is framing.Record and frames[1].large_size == len(big)
    assert [f.offset for f in frames] == [0, 1, 2]

    assert _read_all(seg.large_payload(1)) == big
    part = seg.large_payload(1)
    assert b"".join(part.pieces(5, PIECE_BYTES + 9)) == big[5 : PIECE_BYTES + 10]
    assert b"".join(part.pieces(len(big) - 3, len(big) + 100)) == big[-3:]
    part.close()
    with pytest.raises(NotLarge):
        seg.large_payload(0)
    assert seg.large_payload(3) is None


def test_a_read_of_one_record_finds_it_from_any_block_size(tmp_path):
    """Reads that start on the large record, past it, or take one event at a time all see it
    as the same head (the read's first block is far smaller than the record)."""
    seg = _seg(tmp_path)
    for i in range(50):
        seg.append([EventIn(f"small{i}".encode() * 40)])
    seg.append([EventIn(_spooled(tmp_path, _payload(2 * PIECE_BYTES)), key=b"big")])
    for i in range(5):
        seg.append([EventIn(f"late{i}".encode())])
    assert [r.offset for r in seg.read(50, 1)] == [50]
    assert seg.read(50, 1)[0].key == b"big"
    assert [r.offset for r in seg.read(45, 100)] == list(range(45, 56))
    assert [r.payload for r in seg.read(51, 2)] == [b"late0", b"late1"]
    assert seg.size_till(51) == seg.size_till(50) + 2 * PIECE_BYTES


def test_a_whole_read_of_a_corrupt_payload_never_ends_as_if_whole(tmp_path):
    seg = _seg(tmp_path)
    big = _payload(PIECE_BYTES + 100)
    seg.append([EventIn(_spooled(tmp_path, big))])
    path = seg.chunk_path(seg.chunk_bases()[-1])
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) - 50)  # a byte of its last piece
        f.write(b"X")
    large = seg.large_payload(0)
    got = []
    with pytest.raises(CorruptSegment):
        for piece in large.pieces():
            got.append(piece)
    large.close()
    assert sum(map(len, got)) < len(big)
    part = seg.large_payload(0)  # a range is not checked (its CRC covers the whole payload)
    assert len(b"".join(part.pieces(0, 10))) == 11
    part.close()


def test_recovery_keeps_a_whole_large_record_and_cuts_a_torn_one(tmp_path):
    seg = _seg(tmp_path)
    big = _payload(PIECE_BYTES + 5)
    seg.append([EventIn(_spooled(tmp_path, big))])
    seg.append([EventIn(_spooled(tmp_path, _payload(5000, seed=2)))])
    path = seg.chunk_path(seg.chunk_bases()[-1])
    os.truncate(path, os.path.getsize(path) - 10)  # the second torn
    (seg.path / "tail").unlink()  # as if the host restarted before the tail reached its disk
    seg2 = Segment(seg.path, seg.config)
    assert seg2.append([EventIn(b"next")]).first_offset == 1
    assert [r.large_size for r in seg2.read(0, 10)] == [len(big), None]
    assert _read_all(seg2.large_payload(0)) == big


def test_the_spool_refuses_a_body_cut_off_or_over_its_cap(tmp_path):
    with pytest.raises(BodyCutOff) as cut:
        _spooled(tmp_path, b"x" * 100, size=150)
    assert (cut.value.got, cut.value.expected) == (100, 150)
    with pytest.raises(BodyTooLarge):
        spool(io.BytesIO(b"y" * 101).read, None, tmp_path / "spool", 100)
    within = spool(io.BytesIO(b"y" * 100).read, None, tmp_path / "spool", 100)
    assert len(within) == 100
    assert os.listdir(tmp_path / "spool") == []  # unnamed: nothing left behind


def test_a_large_event_in_a_binary_answer_goes_with_its_size(tmp_path):
    seg = _seg(tmp_path)
    seg.append([EventIn(_spooled(tmp_path, _payload(10_000)), key=b"k")])
    rec = seg.read(0, 1)[0]
    framed = framing.frame_record(rec)
    body_len, _ = framing.FRAME.unpack_from(framed, 0)
    flags = framed[framing.FRAME_SIZE]
    assert flags & framing.FLAG_LARGE
    assert struct.unpack("<Q", framed[-8:]) == (10_000,)
    assert body_len == len(framed) - framing.FRAME_SIZE
