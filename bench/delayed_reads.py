"""Reading a stream where most events are delayed (issue 43, point 6, PIP-195's read path): N
events on one segment, `--delayed` percent of them due a day later (spread evenly among the
others), published in batches of 1000 through `streams.services.do_publish` (the delayed index
takes them). Then one reader group per ack policy reads the stream from its head to its tail,
`consuming.read(max_events=--page)` in a loop (an EXPLICIT group acknowledging each read's
deliveries by the next read, as the client's `consume()` does): the events delivered per second,
the reads it took, and the records each read looked at per event delivered. In one process, on
PostgreSQL and Redis (the machine's), the application as a web worker runs it.

Usage: python bench/delayed_reads.py [--events 200000] [--delayed 90] [--page 1000]
"""

from __future__ import annotations

import argparse
import shutil
import time

from _common import in_process_environment, machine


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--delayed", type=int, default=90, help="percent of the events delayed")
    parser.add_argument("--page", type=int, default=1000)
    args = parser.parse_args()
    work = in_process_environment("delayed-reads-", "cbr_bench_delayed_reads", 4)
    try:
        run(args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args) -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    from domain.events import EventIn
    from groups import consuming, reader_groups
    from streams import services

    print(f"machine: {machine()}")
    stream = services.do_create_stream(scope="bench", name="mostly-delayed", segment_count=1)
    later = int(time.time() * 1000) + 86_400_000
    every = 100 // max(1, 100 - args.delayed) if args.delayed < 100 else 0  # one ordinary event in `every`
    t0 = time.perf_counter()
    for first in range(0, args.events, 1000):
        batch = [
            EventIn(f"event {i}".encode(), deliver_at_ms=None if every and i % every == 0 else later + i)
            for i in range(first, min(args.events, first + 1000))
        ]
        services.do_publish(stream, batch)
    ordinary = sum(1 for i in range(args.events) if every and i % every == 0)
    print(
        f"{args.events} events on one segment, {args.events - ordinary} delayed a day, {ordinary} ordinary; "
        f"published in {time.perf_counter() - t0:.1f} s"
    )
    print(f"reads of max_events={args.page} from the head to the tail:")
    for policy in ("NONE", "EXPLICIT"):
        group = reader_groups.do_create_reader_group(
            scope="bench",
            name=f"g-{policy.lower()}",
            streams=[stream],
            retention_type="NONE",
            ack_policy=policy.lower(),
        )
        delivered, reads, empty, ack = 0, 0, 0, None
        t0 = time.perf_counter()
        while delivered < ordinary and empty < 1000:  # (a read whose records were all delayed answers none)
            result = consuming.read(group, max_events=args.page, consumer="c", ack=ack)
            reads += 1
            got = result.deliveries
            delivered += len(got)
            empty = 0 if got else empty + 1
            ack = {"delivery_ids": [d["delivery_id"] for d in got]} if got and policy == "EXPLICIT" else None
        took = time.perf_counter() - t0
        assert delivered == ordinary, (delivered, ordinary)
        print(
            f"  {policy:8s} {delivered / took:10,.0f} events/s delivered ({delivered} in {took:.2f} s, {reads} reads, "
            f"{args.events / max(1, delivered):.1f} records looked at per event delivered)"
        )


if __name__ == "__main__":
    main()
