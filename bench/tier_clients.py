"""boto3 against obstore, the two S3 clients that can keep the tier's create-once promise (a PUT
with `If-None-Match: *`), on what the tier does (issue 42, docs/decisions.md): a create-once
write of a 16 MiB chunk, a whole read of it, and the small ranged reads of a time lookup (4 KiB),
against one S3-compatible server (moto's, on 127.0.0.1: a Python server, so both clients meet the
same server costs; the difference between them is the client's). Each client's operations run
A B A B, round after round, and the medians are printed.

Usage: python bench/tier_clients.py [--chunk-mib 16] [--chunks 4] [--ranged 200] [--rounds 3]
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

import obstore  # noqa: E402
from obstore.store import S3Store  # noqa: E402
from tier_servers import S3Server  # noqa: E402  (the tests' moto server, from tests/)

from store.tier.s3 import S3Tier  # noqa: E402


class Boto3:
    name = "boto3"

    def __init__(self, server: S3Server, bucket: str):
        self.tier = S3Tier(bucket, "cbr", client=server.client())

    def put(self, key: str, data: bytes) -> None:
        self.tier.put(key, data)

    def get(self, key: str) -> bytes:
        return self.tier.get(key)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        return self.tier.get(key, start=start, length=length)


class Obstore:
    name = "obstore"

    def __init__(self, server: S3Server, bucket: str):
        self.store = S3Store(
            bucket,
            prefix="cbr",
            endpoint=server.url,
            region="us-east-1",
            access_key_id="cbr-tests",
            secret_access_key="cbr-tests",
            client_options={"allow_http": True},
        )

    def put(self, key: str, data: bytes) -> None:
        obstore.put(self.store, key, data, mode="create")  # If-None-Match: *

    def get(self, key: str) -> bytes:
        return bytes(obstore.get(self.store, key).bytes())

    def get_range(self, key: str, start: int, length: int) -> bytes:
        return bytes(obstore.get_range(self.store, key, start=start, length=length))


def one_round(client, chunks: list[bytes], prefix: str, ranged: int) -> dict[str, float]:
    mib = sum(len(c) for c in chunks) / 2**20
    t0 = time.perf_counter()
    for i, data in enumerate(chunks):
        client.put(f"{prefix}/{i}", data)
    write = mib / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i, data in enumerate(chunks):
        assert client.get(f"{prefix}/{i}") == data
    read = mib / (time.perf_counter() - t0)
    size = len(chunks[0])
    t0 = time.perf_counter()
    for j in range(ranged):
        at = (j * 7919 * 4096) % (size - 4096)
        assert client.get_range(f"{prefix}/{j % len(chunks)}", at, 4096) == chunks[j % len(chunks)][at : at + 4096]
    per_range = (time.perf_counter() - t0) * 1000 / ranged
    return {"create-once write MB/s": write, "whole read MB/s": read, "4 KiB ranged read ms": per_range}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunk-mib", type=int, default=16)
    parser.add_argument("--chunks", type=int, default=4)
    parser.add_argument("--ranged", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-tier-clients-"))
    server = S3Server(work / "moto.log")
    try:
        server.client().create_bucket(Bucket="bench")
        clients = [Boto3(server, "bench"), Obstore(server, "bench")]
        print(f"machine: {machine()}")
        print(
            f"{args.chunks} objects of {args.chunk_mib} MiB a round, {args.ranged} ranged reads of 4 KiB; moto on 127.0.0.1"
        )
        figures: dict[str, dict[str, list[float]]] = {}
        for r in range(args.rounds):
            chunks = [os.urandom(args.chunk_mib * 2**20) for _ in range(args.chunks)]
            order = clients if r % 2 == 0 else clients[::-1]
            for client in order:
                got = one_round(client, chunks, f"r{r}/{client.name}", args.ranged)
                for k, v in got.items():
                    figures.setdefault(client.name, {}).setdefault(k, []).append(v)
                print(f"round {r + 1} {client.name:>8}: " + ", ".join(f"{k} {v:.2f}" for k, v in got.items()))
        for name, f in figures.items():
            print(f"{name} medians: " + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in f.items()))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
