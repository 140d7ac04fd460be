"""Retention decisions per second, local engine vs Spark engine, on synthetic fleets.

Each stream: 4 segments, 3 subscribers, 48 retention-set records (one per 30-minute cycle), a
consumption-based size or time policy — metadata only, no events. Streams are generated from their
id with a seeded RNG, so both engines see the same fleet without holding it all in memory.
Usage: python bench/retention.py [--sizes 10000,100000] [--master local[2]]

The end-to-end cycle with the database and truncations applied is `bench/retention_cycle.py`.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, machine

from domain.retention import Inputs, Policy, Subscriber, decide
from domain.retention_set import RetentionRecord
from spark_tasks.retention_job import InputsWriter, decide_frame, ship_code
from spark_tasks.session import get_spark

SEGMENTS = ("0", "1", "2", "3")
RECORDS = 48
BATCH = 20_000


def make_inputs(stream_id: int) -> Inputs:
    rng = random.Random(stream_id)
    now = 1_800_000_000.0
    cut = {s: 0 for s in SEGMENTS}
    records = []
    for k in range(RECORDS):
        cut = {s: o + rng.randint(50, 150) for s, o in cut.items()}
        records.append(RetentionRecord(now - (RECORDS - k) * 1800, sum(cut.values()) * 100, dict(cut)))
    tail = records[-1].cut
    subs = []
    for i in range(3):
        sub_cut = {s: rng.randint(o // 2, o) for s, o in tail.items()}
        subs.append(Subscriber(f"g{i}", sub_cut, {s: o * 100 for s, o in sub_cut.items()}, now - rng.randint(0, 600)))
    if stream_id % 2:
        policy = Policy("size", min=200_000, max=2_000_000, consumption_based=True, subscriber_timeout_s=3600)
    else:
        policy = Policy("time", min=3600, max=12 * 3600, consumption_based=True, subscriber_timeout_s=3600)
    return Inputs(now, policy, tuple(records), tuple(subs))


def bench_local(n: int) -> tuple[float, float]:
    """(decisions/s including generation, decisions/s of decide alone)"""
    t0 = time.perf_counter()
    spent_deciding = 0.0
    for sid in range(1, n + 1):
        inputs = make_inputs(sid)
        t1 = time.perf_counter()
        decide(inputs)
        spent_deciding += time.perf_counter() - t1
    total = time.perf_counter() - t0
    return n / total, n / spent_deciding


def write_fleet(n: int, path: Path, files: int) -> float:
    """The fleet's inputs as the cycle writes them: batches spread over `files` Parquet files."""
    t0 = time.perf_counter()
    batch = max(500, min(BATCH, n // (files * 4)))  # several batches a file, whatever n
    with InputsWriter(files=files, directory=path) as writer:
        for start in range(1, n + 1, batch):
            writer.write([(sid, make_inputs(sid)) for sid in range(start, min(start + batch, n + 1))])
    return time.perf_counter() - t0


def bench_spark(n: int, spark, directory: Path) -> tuple[float, float]:
    """(seconds to extract the fleet to Parquet, decisions/s of the Spark job)"""
    path = directory / f"fleet-{n}"
    path.mkdir()
    extract_s = write_fleet(n, path, spark.sparkContext.defaultParallelism)
    t0 = time.perf_counter()
    decided = decide_frame(spark.read.parquet(str(path))).toPandas()
    elapsed = time.perf_counter() - t0
    assert len(decided) == n
    return extract_s, n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"machine: {machine()}")
    print(
        f"fleet: {len(SEGMENTS)} segments x 3 subscribers x {RECORDS} retention records per stream; Spark master {args.master}"
    )
    if not args.master.startswith("local"):
        # a cluster's executors run this interpreter too (see bench/spark_standalone.py)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = get_spark(master=args.master)
    ship_code(spark)
    (ROOT / "var").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "var") as d:
        bench_spark(2000, spark, Path(d))  # warm the session and its Python workers
        results = {}
        for n in sizes:
            local_rate, decide_rate = bench_local(n)
            extract_s, spark_rate = bench_spark(n, spark, Path(d))
            results[n] = (decide_rate, spark_rate)
            print(
                f"N={n:>9,}  local engine {decide_rate:8,.0f} decisions/s ({n / decide_rate:6.1f} s)"
                f"  spark job {spark_rate:8,.0f} decisions/s ({n / spark_rate:6.1f} s, + {extract_s:5.1f} s"
                f" to write the inputs to Parquet)  spark time / local time {decide_rate / spark_rate:4.2f}"
                f"  [generating the synthetic fleet: {local_rate:,.0f} streams/s]"
            )
        ordered = sorted(results)
        for a, b in zip(ordered, ordered[1:]):
            la, sa = results[a]
            lb, sb = results[b]
            print(
                f"N {a:,} -> {b:,} ({b // a}x streams): local time x{(b / lb) / (a / la):.1f}, spark time x{(b / sb) / (a / sa):.1f}"
            )


if __name__ == "__main__":
    main()
