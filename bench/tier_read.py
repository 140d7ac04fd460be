"""Reads of chunks released to long-term storage (issue 42), against the same reads of local
chunks, through the store's one read path (`Segment.read`, what plain reads, reader groups and
the browser call): a segment of CHUNKS chunks of CBR's default size (16 MiB), read from its head
to its tail in pages of 1000 events, when every chunk is local; when every chunk was released
and the local cache is empty (cold: each chunk fetched whole, checked, cached); and again (the
cache). Then what a retention time lookup costs (`offset_at_time`, a binary search reading one
record per probe): local, released and uncached (ranged reads), released and cached. For a file
tier (a directory on the same disk) and an S3 tier (moto's server on 127.0.0.1, through boto3:
a Python server, so the S3 figures are moto's as much as the client's).

Usage: python bench/tier_read.py [--chunks 4] [--payload 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, machine

sys.path.insert(0, str(ROOT / "tests"))

from tier_servers import S3Server  # noqa: E402  (the tests' moto server, from tests/)

from domain.events import EventIn  # noqa: E402
from store.offload import tier_key  # noqa: E402
from store.segment import Segment, StoreConfig  # noqa: E402
from store.tier import reading  # noqa: E402
from store.tier.opening import tier_for  # noqa: E402
from store.tier.reading import TieredStub  # noqa: E402

CHUNK = 16 * 1024 * 1024


def build(path: Path, config: StoreConfig, chunks: int, payload: int) -> tuple[Segment, int]:
    seg = Segment(path, config)
    body = os.urandom(payload)
    t = 1_700_000_000_000
    n = 0
    while len(seg.sealed_chunks()) < chunks:
        seg.append([EventIn(body) for _ in range(500)], now_ms=t + n)
        n += 500
    return seg, seg.committed_tail().active_base


def release(seg: Segment, tier, prefix: str) -> int:
    released = 0
    for base in seg.sealed_chunks():
        data = seg.chunk_path(base).read_bytes()
        stored = tier.put(tier_key(prefix, "0", base, "chunk"), data)
        seg.release_to_tier(base, TieredStub(stored.key, stored.size, stored.crc32c, seg.chunk_cum_size(base)))
        released += 1
    return released


def read_through(seg: Segment, end: int) -> float:
    """Events/s reading [head, end) in pages of 1000."""
    t0 = time.perf_counter()
    at = 0
    while at < end:
        got = seg.read(at, min(1000, end - at))
        at = got[-1].offset + 1
    return end / (time.perf_counter() - t0)


def lookups_ms(seg: Segment, end: int, n: int = 15) -> float:
    """Median ms of a time lookup (a binary search over the segment)."""
    first = seg.read(0, 1)[0].published_ms
    last = seg.read(end - 1, 1)[0].published_ms
    out = []
    for i in range(n):
        ms = first + (last - first) * (i + 0.5) / n
        t0 = time.perf_counter()
        seg.offset_at_time(int(ms))
        out.append((time.perf_counter() - t0) * 1000)
    return statistics.median(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=4)
    parser.add_argument("--payload", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-tier-read-"))
    server = S3Server(work / "moto.log")
    for name, value in server.env.items():
        os.environ[name] = value
    server.client().create_bucket(Bucket="bench")
    urls = {"file": f"file://{work}/tier", "s3 (moto)": "s3://bench/cbr"}
    print(f"machine: {machine()}")
    print(f"a segment of {args.chunks} sealed chunks of 16 MiB, events of {args.payload} B; pages of 1000 events")
    figures: dict[str, dict[str, list[float]]] = {}
    try:
        for r in range(args.rounds):
            for name, url in urls.items():
                cache = work / f"cache-{r}-{name[:4]}"
                config = StoreConfig(chunk_bytes=CHUNK, chunk_seconds=10**6, tier_url=url, tier_cache_dir=str(cache))
                seg, end = build(work / f"seg-{r}-{name[:4]}", config, args.chunks, args.payload)
                os.sync()
                got = {
                    "local read (ev/s)": read_through(seg, end),
                    "local time lookup (ms)": lookups_ms(seg, end),
                }
                release(seg, tier_for(url), f"r{r}{name[:4]}")
                reading.take_counts()
                got["released, cold: ranged time lookup (ms)"] = lookups_ms(seg, end)
                ranged = reading.take_counts().get("ranged", 0)
                got["released, cold read (ev/s)"] = read_through(seg, end)
                got["released, cached read (ev/s)"] = read_through(seg, end)
                got["released, cached time lookup (ms)"] = lookups_ms(seg, end)
                counts = reading.take_counts()
                for k, v in got.items():
                    figures.setdefault(name, {}).setdefault(k, []).append(v)
                print(
                    f"round {r + 1} {name:>10}: "
                    + ", ".join(f"{k} {v:,.1f}" for k, v in got.items())
                    + f" [ranged reads in the cold lookups {ranged}, whole fetches {counts.get('miss', 0)}]"
                )
                shutil.rmtree(cache, ignore_errors=True)
        for name, f in figures.items():
            print(f"{name} medians: " + ", ".join(f"{k} {statistics.median(v):,.1f}" for k, v in f.items()))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
