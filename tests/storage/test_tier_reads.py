"""A segment whose sealed chunks were released to the tier (store/segment/release.py) reads exactly
as before (store/segment/reads.py, store/tier/reading.py), on a file tier and on a real
S3-compatible server the tests start: every record, from any offset, as records and as frames;
sizes and times; a read near a chunk's end fetches only a range; whole fetches land in a bounded
cache; a truncation deletes stubs; a local copy that differs from the tier's is kept."""

import io
from dataclasses import replace

import pytest

from domain.events import EventIn
from store.large import spool
from store.offload import tier_key
from store.segment import LocalCopyDiffers, Segment, StoreConfig
from store.segment.directory import TIERED
from store.tier import reading
from store.tier.base import TierUnavailable
from store.tier.opening import tier_for
from store.tier.reading import TieredStub
from streams import waking

EVENTS = 400


@pytest.fixture(autouse=True)
def _no_listener():
    """These tests read the store's process-wide counts of tier reads: a wake-up listener that an
    earlier test left running in this process takes them every second for /metrics."""
    waking.stop_listener()


@pytest.fixture(params=["file", "s3"])
def tier_url(request, tmp_path, monkeypatch):
    tier_for.cache_clear()
    if request.param == "file":
        yield f"file://{tmp_path}/tier"
    else:
        server = request.getfixturevalue("s3_server")
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)
        yield f"s3://{server.new_bucket()}/cbr"
    tier_for.cache_clear()


def make_segment(tmp_path, tier_url, cache_bytes=64 * 1024 * 1024) -> Segment:
    config = StoreConfig(
        chunk_bytes=4096,
        index_interval_bytes=256,
        tier_url=tier_url,
        tier_cache_dir=str(tmp_path / "cache"),
        tier_cache_bytes=cache_bytes,
        tier_ranged_min_bytes=0,  # ranged reads even of these small chunks
    )
    seg = Segment(tmp_path / "s" / "0", config)
    for i in range(EVENTS):
        seg.append([EventIn(f"event {i:04d} ".encode() + b"x" * (40 + i % 50))], now_ms=1_000_000 + i * 10)
    return seg


def release_all(seg: Segment, tier_url: str) -> list[int]:
    """Copy every sealed chunk to the tier (as streams.tiering does) and release its local copy."""
    tier = tier_for(tier_url)
    released = []
    for base in seg.sealed_chunks():
        data = seg.chunk_path(base).read_bytes()
        stored = tier.put(tier_key("s", "0", base, "chunk"), data)
        cum_size = seg.chunk_cum_size(base)
        freed = seg.release_to_tier(base, TieredStub(stored.key, stored.size, stored.crc32c, cum_size))
        assert freed == len(data)
        released.append(base)
    return released


def test_a_released_segment_reads_exactly_as_a_local_one(tmp_path, tier_url):
    seg = make_segment(tmp_path, tier_url)
    before = seg.read(0, EVENTS)
    frames_before = seg.read_frames(0, EVENTS)
    sizes = [seg.size_till(o) for o in (0, 1, 57, 200, 399, 400)]
    times = [seg.offset_at_time(ms) for ms in (0, 1_000_500, 1_002_000, 1_003_995, 9_999_999)]
    released = release_all(seg, tier_url)
    assert len(released) >= 8
    for base in released:  # the stub stands for the chunk; its sparse index stays
        assert not seg.chunk_path(base).exists()
        assert seg.chunk_path(base, TIERED).exists() and seg.chunk_path(base, "idx").exists()
    assert seg.chunk_bases()[: len(released)] == released
    assert seg.info().chunk_count == len(released) + 1

    assert seg.read(0, EVENTS) == before
    assert [bytes(f.data) for f in seg.read_frames(0, EVENTS)] == [bytes(f.data) for f in frames_before]
    for start in (0, 13, 150, 299, 398):  # from any offset, a few records at a time
        assert seg.read(start, 7) == before[start : start + 7]
    assert [seg.size_till(o) for o in (0, 1, 57, 200, 399, 400)] == sizes
    assert [seg.offset_at_time(ms) for ms in (0, 1_000_500, 1_002_000, 1_003_995, 9_999_999)] == times


def test_a_small_chunk_is_always_fetched_whole(tmp_path, tier_url):
    seg = make_segment(tmp_path, tier_url)
    expected = seg.read(0, EVENTS)
    second = release_all(seg, tier_url)[1]
    small = Segment(seg.path, replace(seg.config, tier_ranged_min_bytes=1024 * 1024))
    reading.take_counts()
    assert small.read(second - 1, 1) == [expected[second - 1]]
    assert reading.take_counts() == {"miss": 1}


def test_a_read_near_a_chunks_end_fetches_a_range_and_a_read_from_its_start_caches_it(tmp_path, tier_url):
    seg = make_segment(tmp_path, tier_url)
    expected = seg.read(0, EVENTS)
    first, second = release_all(seg, tier_url)[:2]
    last_of_first = second - 1
    reading.take_counts()

    assert seg.read(last_of_first, 1) == [expected[last_of_first]]  # one record: a range
    assert reading.take_counts() == {"ranged": 1}
    assert not list((tmp_path / "cache").rglob("*.chunk"))

    assert seg.read(first, 5) == expected[first : first + 5]  # from the start: the whole chunk, cached
    assert reading.take_counts() == {"miss": 1}
    assert seg.read(first + 2, 50) == expected[first + 2 : first + 52]  # the cached copy, then the next chunk
    counts = reading.take_counts()
    assert counts["hit"] == 1 and counts["miss"] == 1


def test_the_cache_stays_within_its_bound(tmp_path, tier_url):
    seg = make_segment(tmp_path, tier_url, cache_bytes=3 * 4096)
    expected = seg.read(0, EVENTS)
    release_all(seg, tier_url)
    assert seg.read(0, EVENTS) == expected
    cached = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert 1 <= len(cached) <= 3
    assert sum(p.stat().st_size for p in cached) <= 3 * 4096


def test_a_truncation_deletes_released_chunks_stubs(tmp_path, tier_url):
    seg = make_segment(tmp_path, tier_url)
    expected = seg.read(0, EVENTS)
    released = release_all(seg, tier_url)
    result = seg.truncate(released[3] + 1)
    assert result.chunks_deleted == 3 and result.bytes_deleted == 0  # nothing local was left to free
    for base in released[:3]:
        assert not seg.chunk_path(base, TIERED).exists() and not seg.chunk_path(base, "idx").exists()
    assert seg.read(0, EVENTS) == expected[released[3] + 1 :]


def test_a_local_copy_that_differs_from_the_tiers_is_kept(tmp_path, tier_url):
    seg = make_segment(tmp_path, tier_url)
    base = seg.sealed_chunks()[0]
    data = seg.chunk_path(base).read_bytes()
    stored = tier_for(tier_url).put(tier_key("s", "0", base, "chunk"), data)
    with pytest.raises(LocalCopyDiffers):
        seg.release_to_tier(base, TieredStub(stored.key, stored.size, "00000000", seg.chunk_cum_size(base)))
    assert seg.chunk_path(base).read_bytes() == data and not seg.chunk_path(base, TIERED).exists()
    active = seg.committed_tail().active_base  # the active chunk is never released
    assert seg.release_to_tier(active, TieredStub("k", 1, "00000000", 0)) == 0


def test_a_tier_that_does_not_answer_fails_the_read_of_a_released_chunk_only(tmp_path):
    seg = make_segment(tmp_path, f"file://{tmp_path}/tier")
    expected = seg.read(0, EVENTS)
    released = release_all(seg, f"file://{tmp_path}/tier")
    (tmp_path / "tier").rename(tmp_path / "tier-gone")
    active = seg.committed_tail().active_base
    assert seg.read(active, EVENTS) == expected[active:]  # local data reads on
    with pytest.raises(TierUnavailable):
        seg.read(released[1], 5)


def test_a_large_event_released_to_the_tier_is_read_by_range_from_it(tmp_path, tier_url):
    config = StoreConfig(
        chunk_bytes=4096, tier_url=tier_url, tier_cache_dir=str(tmp_path / "cache"), tier_ranged_min_bytes=0
    )
    seg = Segment(tmp_path / "s" / "0", config)
    seg.append([EventIn(b"first")])
    body = bytes(range(256)) * 5000  # 1.2 MiB: several pieces
    payload = spool(io.BytesIO(body).read, len(body), tmp_path / "spool", 1 << 30)
    seg.append([EventIn(payload, key=b"k")])
    seg.append([EventIn(b"after")])  # rolls: the large event's chunk is sealed
    assert release_all(seg, tier_url)
    assert not any(seg.chunk_path(b).exists() for b in seg.sealed_chunks())
    before = reading.take_counts()
    large = seg.large_payload(1)
    try:
        assert b"".join(large.pieces()) == body
        assert b"".join(large.pieces(1000, 1999)) == body[1000:2000]
    finally:
        large.close()
    counts = reading.take_counts()
    assert counts.get("ranged", 0) >= 3 and "miss" not in counts, (before, counts)  # never fetched whole
    assert [r.large_size for r in seg.read(0, 10)] == [None, len(body), None]
