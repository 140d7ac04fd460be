"""Sequential read of 1M events from a cut, straight from the segment store.

Writes 1,000,000 100-byte events (batches of 1000) into one segment with the default chunk size,
then reads them all from offset 0 in pages of `--page` events, as a consumer would, and prints
events/s. A second figure reads through the stream layer (all segments, merged by publish time).
Usage: python bench/read.py [--events N] [--page N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import ROOT, machine

from domain.events import EventIn
from store.segment import StoreConfig
from store.store import SegmentStore


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--page", type=int, default=1000)
    args = parser.parse_args()
    (ROOT / "var").mkdir(exist_ok=True)
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(dir=ROOT / "var") as d:
        store = SegmentStore(Path(d), StoreConfig(fsync="never"))
        for segments in (1, 4):
            log = store.stream(f"read{segments}", segments)
            batch = [EventIn(b"x" * 100) for _ in range(1000)]
            for _ in range(args.events // 1000):
                log.append(batch)
            chunks = sum(i.chunk_count for i in log.infos().values())

            if segments == 1:
                seg = log.segment("0")
                t0 = time.perf_counter()
                offset, n = 0, 0
                while True:
                    got = seg.read(offset, args.page)
                    if not got:
                        break
                    n += len(got)
                    offset = got[-1].offset + 1
                el = time.perf_counter() - t0
                assert n == args.events
                print(
                    f"segment read, {chunks} chunks, pages of {args.page}:  {n / el:12,.0f} events/s ({n:,} events in {el:.2f} s)"
                )

            t0 = time.perf_counter()
            cut: dict[str, int] = {}
            n = 0
            while True:
                got, cut = log.read(cut, args.page)
                if not got:
                    break
                n += len(got)
            el = time.perf_counter() - t0
            assert n == args.events
            print(
                f"stream read, {segments} segment(s), pages of {args.page}: {n / el:12,.0f} events/s ({n:,} events in {el:.2f} s)"
            )


if __name__ == "__main__":
    main()
