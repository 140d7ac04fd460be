"""A writer in its own process, for the crash and concurrency tests.

Usage: python writer_process.py <segment dir> <batches> <events per batch> <tag>
Prints "ack <first offset> <count>" after each append returns (i.e. after it is acknowledged).
"""

import sys
from pathlib import Path

from domain.events import EventIn
from store.segment import Segment, StoreConfig


def main() -> None:
    path, batches, per_batch, tag = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    seg = Segment(Path(path), StoreConfig(chunk_bytes=64 * 1024))
    for b in range(batches):
        events = [EventIn(f"{tag}-{b}-{i}".encode() * 3, headers={"w": tag}) for i in range(per_batch)]
        res = seg.append(events)
        print(f"ack {res.first_offset} {res.count}", flush=True)


if __name__ == "__main__":
    main()
