"""Delayed sealing: cutting a bucket's indexes into snapshot segments, in process against Spark.

(a) one bucket of N indexes: sorted and cut in process (`domain.delayed.cut_segments`), against
    a Spark job that sorts them on the cluster and cuts them in one partition with the same
    cutter (`spark_cut` below: the job CBR ran for large buckets until this benchmark retired it);
(b) N indexes over B buckets (many streams sealing at once): every bucket in turn in process,
    against one Spark job with a task per bucket (`spark_tasks.executors.run_in_executors`), each
    cutting its bucket in an executor.
Indexes: random due times over a day, 4 segments, one chunk a bucket. The Spark session is
started before any timing. Prints seconds per figure, the median of --rounds.

Usage: python bench/delayed_sealing.py [--indexes 1000000] [--buckets 100] [--master local[2]] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from pathlib import Path

from _common import machine

WINDOW_MS, PER_SEGMENT = 60_000, 10_000


def make(n: int, buckets: int, seed: int = 7) -> list[list[tuple[int, int, int, int]]]:
    rng = random.Random(seed)
    per = n // buckets
    return [
        [(rng.randrange(0, 86_400_000), b + 1, rng.randrange(4), offset) for offset in range(per)]
        for b in range(buckets)
    ]


def cut_one_bucket(rows: list[tuple[int, int, int, int]]) -> int:
    """A bucket cut in process; the number of snapshot segments (the executors' task too)."""
    from domain.delayed import Index, cut_segments

    return len(cut_segments(sorted(Index(*r) for r in rows), WINDOW_MS, PER_SEGMENT))


def spark_cut(spark, indexes, window: int, max_per_segment: int) -> int:
    """The retired Spark job: sort on the cluster, cut in one sorted partition (`mapInPandas`),
    the segments back through the driver; the number of snapshot segments."""
    from domain.delayed import SegmentCutter

    order = ["deliver_at", "chunk", "segment", "offset"]

    def cut(batches):
        cutter = SegmentCutter(window, max_per_segment)
        for pdf in batches:
            yield pdf.assign(segment_no=[cutter.place(int(t)) for t in pdf["deliver_at"]])

    frame = spark.createDataFrame(indexes, "deliver_at bigint, chunk bigint, segment int, offset bigint")
    single = frame.select(*order).coalesce(1).sortWithinPartitions(*order)
    ddl = "deliver_at bigint, chunk bigint, segment int, offset bigint, segment_no int"
    return 1 + max(row.segment_no for row in single.mapInPandas(cut, schema=ddl).toLocalIterator())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--indexes", type=int, default=1_000_000)
    parser.add_argument("--buckets", type=int, default=100)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbrweb.settings")
    import django

    django.setup()
    from spark_tasks.executors import run_in_executors
    from spark_tasks.session import get_spark

    spark = get_spark(master=args.master)
    for module in ("_common.py", "delayed_sealing.py"):  # what the executors' tasks import from here
        spark.sparkContext.addPyFile(str(Path(__file__).with_name(module)))
    print(f"machine: {machine()}")
    print(f"{args.indexes:,} indexes; (a) one bucket, (b) {args.buckets} buckets; Spark master {args.master}")
    one = [r for bucket in make(args.indexes, 1) for r in bucket]
    many = make(args.indexes, args.buckets)
    spark_cut(spark, one[:10_000], WINDOW_MS, PER_SEGMENT)  # warm the Python workers
    run_in_executors("delayed_sealing:cut_one_bucket", many[:2], spark=spark)
    figures: dict[str, list[float]] = {}

    def timed(name, fn):
        t0 = time.perf_counter()
        result = fn()
        figures.setdefault(name, []).append(time.perf_counter() - t0)
        return result

    for _ in range(args.rounds):
        a = timed("(a) one bucket, in process", lambda: cut_one_bucket(one))
        b = timed(
            "(a) one bucket, Spark job",
            lambda: spark_cut(spark, one, WINDOW_MS, PER_SEGMENT),
        )
        assert a == b, (a, b)
        c = timed("(b) many buckets, in process", lambda: [cut_one_bucket(rows) for rows in many])
        d = timed(
            "(b) many buckets, a Spark task each",
            lambda: run_in_executors("delayed_sealing:cut_one_bucket", many, spark=spark),
        )
        assert c == d
    for name, seconds in figures.items():
        print(f"{name:<40} {statistics.median(seconds):7.2f} s  (range {min(seconds):.2f}-{max(seconds):.2f})")


if __name__ == "__main__":
    main()
