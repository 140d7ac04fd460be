"""Long-term storage on this machine (issue 42): how fast sealed chunks go to a tier, and how fast
a whole chunk comes back from it against a read of the local file, for a file tier (a directory
on the same disk) and an S3 tier (moto's server on 127.0.0.1: a Python server, so its figures
are moto's more than a real store's; they bound what the client side costs).

Each round writes CHUNKS chunk-sized objects of random bytes (create-once, then read back and
checked, as an offload does), then reads each back whole (cold: a new key each time) and reads the
same bytes from a local file. Prints MB/s per round and the medians.

Usage: python bench/tier_offload.py [--chunk-mib 16] [--chunks 8] [--rounds 3]
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

from store.tier.files import FileTier  # noqa: E402
from store.tier.s3 import S3Tier  # noqa: E402


def one_round(tier, chunks: list[bytes], prefix: str, local: Path) -> dict[str, float]:
    mib = sum(len(c) for c in chunks) / 2**20
    t0 = time.perf_counter()
    stored = []
    for i, data in enumerate(chunks):
        s = tier.put(f"{prefix}/{i:020d}.chunk", data)
        tier.get(s.key, s.crc32c)  # the offload's check
        stored.append(s)
    offload = mib / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for s in stored:
        tier.get(s.key, s.crc32c)
    read = mib / (time.perf_counter() - t0)
    for i, data in enumerate(chunks):
        (local / f"{prefix.replace('/', '-')}-{i}").write_bytes(data)
    os.sync()
    t0 = time.perf_counter()
    for i in range(len(chunks)):
        (local / f"{prefix.replace('/', '-')}-{i}").read_bytes()
    local_read = mib / (time.perf_counter() - t0)
    return {"offload": offload, "tier read": read, "local read": local_read}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunk-mib", type=int, default=16)
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-tier-"))
    server = S3Server(work / "moto.log")
    try:
        client = server.client()
        client.create_bucket(Bucket="bench")
        tiers = {"file": FileTier(work / "tier"), "s3 (moto)": S3Tier("bench", "cbr", client=client)}
        (work / "local").mkdir()
        print(f"machine: {machine()}")
        print(f"{args.chunks} chunks of {args.chunk_mib} MiB a round; offload = write once + read back checked")
        figures: dict[str, dict[str, list[float]]] = {n: {} for n in tiers}
        for r in range(args.rounds):
            chunks = [os.urandom(args.chunk_mib * 2**20) for _ in range(args.chunks)]
            for name, tier in tiers.items():
                got = one_round(tier, chunks, f"r{r}/{name[:4]}", work / "local")
                for k, v in got.items():
                    figures[name].setdefault(k, []).append(v)
                print(f"round {r + 1} {name:>10}: " + ", ".join(f"{k} {v:7.1f} MB/s" for k, v in got.items()))
        for name, f in figures.items():
            print(f"{name}: " + ", ".join(f"{k} {statistics.median(v):.1f} MB/s" for k, v in f.items()))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
