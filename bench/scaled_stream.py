"""Publish and consume on a stream scaled 1 → 8 segments (through 1 → 2 → 4 → 8 splits: seven
sealed segments and eight active ones) against one born with 8 (issue 41): the same work in one
process, side by side in interleaved rounds (A B A B), over PostgreSQL and Redis.

Publish: batches of 1000 events of 100 B, each event with its own routing key (so every batch
spreads over the eight active segments), through `streams.services.do_publish` (fsync as
configured). Consume: a reader group reading 1000 at a time through the read path the API uses
(`groups.consuming.read`, with delivery ranges) and acknowledging each batch by its ranges.
Prints events/s of each, per round, their medians and the ratio scaled / born.

Usage: python bench/scaled_stream.py [--events 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time

from _common import in_process_environment, machine

BATCH = 1000


def make_streams():
    from streams.scaling import do_scale
    from streams.services import do_create_stream

    born = do_create_stream(scope="bench", name="born8", segment_count=8)
    scaled = do_create_stream(scope="bench", name="scaled", segment_count=1)
    for _ in range(3):  # 1 → 2 → 4 → 8: split every active segment in two
        layout = scaled.layout
        active = layout.active
        ranges = [r for s in active for r in ([s.lo, (s.lo + s.hi) / 2], [(s.lo + s.hi) / 2, s.hi])]
        do_scale(scaled, seal=[s.id for s in active], new_ranges=ranges)
    assert len(scaled.layout.active_ids) == 8 and len(scaled.layout.ids) == 15
    return {"born": born, "scaled": scaled}


def publish(stream, events: int, start: int) -> float:
    from domain.events import EventIn
    from streams.services import do_publish

    t0 = time.perf_counter()
    for b in range(start, start + events, BATCH):
        do_publish(stream, [EventIn(b"x" * 100, routing_key=f"k{b + i}".encode()) for i in range(BATCH)])
    return events / (time.perf_counter() - t0)


def consume(group, events: int) -> float:
    from groups.consuming import ack, read

    done = 0
    t0 = time.perf_counter()
    while done < events:
        result = read(group, BATCH, consumer="bench", ranges=True)
        got = sum(len(p.items) for p in result.parts)
        if not got:
            break
        ack(group, result.delivery_ranges, consumer="bench")
        done += got
    assert done == events, (done, events)
    return events / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000, help="per stream and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = in_process_environment("bench-scaled-", "cbr_bench_scaled", 12)
    try:
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from groups.reader_groups import do_create_reader_group

        print(f"machine: {machine()}")
        print(f"fsync {settings.CBR_FSYNC}; {args.events:,} events of 100 B per stream and round, batches of {BATCH}")
        streams = make_streams()
        groups = {
            name: do_create_reader_group(scope="bench", name=f"g-{name}", streams=[s], retention_type="NONE")
            for name, s in streams.items()
        }
        figures: dict[str, dict[str, list[float]]] = {n: {"publish": [], "consume": []} for n in streams}
        for r in range(args.rounds):
            for name in ("born", "scaled") if r % 2 == 0 else ("scaled", "born"):
                figures[name]["publish"].append(publish(streams[name], args.events, r * args.events))
                figures[name]["consume"].append(consume(groups[name], args.events))
                print(
                    f"round {r + 1} {name:>6}: publish {figures[name]['publish'][-1]:9,.0f} events/s,"
                    f" consume {figures[name]['consume'][-1]:9,.0f} events/s",
                    flush=True,
                )
        for what in ("publish", "consume"):
            born = statistics.median(figures["born"][what])
            scaled = statistics.median(figures["scaled"][what])
            print(
                f"{what}: born with 8 {born:,.0f} events/s, scaled 1 → 8 {scaled:,.0f} events/s: {scaled / born:.2f}×"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
