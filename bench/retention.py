"""Retention decisions per second: `domain.retention.decide` alone, on synthetic fleets (the rule
both engines run for each stream, in a bucket's work; `bench/retention_cycle.py` times whole
cycles on either engine).

Each stream: 4 segments, 3 subscribers, 48 retention-set records (one per 30-minute cycle), a
consumption-based size or time policy — metadata only, no events. Streams are generated from their
id with a seeded RNG, so a fleet is never held in memory whole.
Usage: python bench/retention.py [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import random
import time

from _common import machine

from domain.retention import Inputs, Policy, Subscriber, decide
from domain.retention_set import RetentionRecord

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"machine: {machine()}")
    print(f"fleet: {len(SEGMENTS)} segments x 3 subscribers x {RECORDS} retention records per stream")
    results = {}
    for n in sizes:
        local_rate, decide_rate = bench_local(n)
        results[n] = decide_rate
        print(
            f"N={n:>9,}  decide {decide_rate:8,.0f} decisions/s ({n / decide_rate:6.1f} s)"
            f"  [generating the synthetic fleet: {local_rate:,.0f} streams/s]"
        )
    ordered = sorted(results)
    for a, b in zip(ordered, ordered[1:]):
        print(f"N {a:,} -> {b:,} ({b // a}x streams): time x{(b / results[b]) / (a / results[a]):.1f}")


if __name__ == "__main__":
    main()
