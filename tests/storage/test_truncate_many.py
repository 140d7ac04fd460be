"""Batched truncation (one sync for many heads), the bounded set of open segments, and the head
recovered after a non-durable head write was lost."""

import os

from domain.events import EventIn
from store import store as store_module
from store.ends import ENDS_FILE, HEAD_AT
from store.segment import StoreConfig, TruncateResult
from store.store import SegmentStore, truncate_many


def events(n, size=40):
    return [EventIn(f"e{i}".encode().ljust(size, b".")) for i in range(n)]


def filled(tmp_path, streams=3, segments=2, n=200):
    store = SegmentStore(tmp_path / "store", StoreConfig(chunk_bytes=2048))
    logs = []
    for k in range(streams):
        log = store.stream(f"s{k}", segments)
        for seg in log.segment_ids:
            for _ in range(n // 20):  # chunks roll between appends: several chunks each
                log.segment(seg).append(events(20))
        logs.append(log)
    return logs


def test_truncate_many_moves_heads_and_deletes_exactly_what_single_truncation_would(tmp_path):
    batched = filled(tmp_path / "a")
    single = filled(tmp_path / "b")
    cuts = [{"0": 77, "1": 150}, {"0": 0, "1": 199}, {"0": 200, "1": 3}]
    got = truncate_many([(log, cut, None) for log, cut in zip(batched, cuts)])
    want = [log.truncate(cut) for log, cut in zip(single, cuts)]
    assert got == want
    for log, cut in zip(batched, cuts):
        assert log.head_cut() == cut
        for seg, offset in cut.items():
            first = log.segment(seg).read(0, 1)
            assert [r.offset for r in first] == ([offset] if offset < 200 else [])
    assert sum(r.chunks_deleted for res in got for r in res.values()) > 0


def test_truncate_many_never_moves_a_head_back(tmp_path):
    (log,) = filled(tmp_path, streams=1)
    truncate_many([(log, {"0": 100, "1": 100}, None)])
    truncate_many([(log, {"0": 50, "1": 120}, {"0": 50 * 40, "1": 120 * 40})])
    assert log.head_cut() == {"0": 100, "1": 120}


def test_a_durable_truncate_many_finishes_a_truncation_interrupted_between_its_halves(tmp_path):
    """A crash after the heads moved (durably) and before the chunks behind them were deleted:
    the same truncation again moves nothing and deletes exactly those chunks; a batch's
    truncation (not durable) would see no head move and leave them."""
    (log,) = filled(tmp_path / "a", streams=1)
    (fresh,) = filled(tmp_path / "b", streams=1)
    cut = {"0": 150, "1": 90}
    want = truncate_many([(fresh, cut, None)], durable=True)[0]
    log.move_heads(cut, {}, durable=True)  # the first half, then the crash
    left = {s: len(log.segment(s).chunk_bases()) for s in cut}
    assert truncate_many([(log, cut, None)])[0] == {
        s: TruncateResult(r.head_after, r.head_after, 0, 0) for s, r in want.items()
    }  # nothing moved: nothing deleted
    assert {s: len(log.segment(s).chunk_bases()) for s in cut} == left
    finished = truncate_many([(log, cut, None)], durable=True)[0]
    assert {s: r.chunks_deleted for s, r in finished.items()} == {s: r.chunks_deleted for s, r in want.items()}
    assert all(r.chunks_deleted > 0 for r in finished.values())
    assert {s: log.segment(s).chunk_bases() for s in cut} == {s: fresh.segment(s).chunk_bases() for s in cut}
    assert log.head_cut() == cut


def test_a_lost_head_file_falls_back_to_the_first_chunk_and_never_past_it(tmp_path):
    (log,) = filled(tmp_path, streams=1)
    seg = log.segment("0")
    seg.truncate(120)
    first = seg.chunk_bases()[0]
    assert 0 < first <= 120
    with open(seg.path.parent / ENDS_FILE, "r+b") as f:  # what a crash before the sync can leave
        f.seek(HEAD_AT)
        f.write(b"\0" * 28)
    head = seg.read_head()
    assert head.offset == first
    assert head.cum_size == seg.size_till(first)
    assert seg.read(0, 1)[0].offset == first


def test_open_segments_and_their_descriptors_stay_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "MAX_OPEN_SEGMENTS", 16)
    fds_before = len(os.listdir("/proc/self/fd"))
    store = SegmentStore(tmp_path / "store", StoreConfig(chunk_bytes=4096))
    for k in range(200):
        log = store.stream(f"s{k}", 2)
        for seg in log.segment_ids:
            log.segment(seg).append(events(3))
        log.truncate({"0": 1, "1": 1})
    assert len(store_module._SEGMENTS) <= 16
    assert len(os.listdir("/proc/self/fd")) - fds_before <= 2 * 16 + 8
    # an evicted segment opens again and still reads what was written
    assert len(store.stream("s0", 2).read({"0": 0, "1": 0}, 10)[0]) == 4  # 3 events a segment, the head at 1 on each
