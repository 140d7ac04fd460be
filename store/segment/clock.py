"""The wall clock a segment stamps publish times and a chunk's age with, in epoch milliseconds.
It must never become a monotonic or per-process clock: the stamps are compared with epoch times
from elsewhere (a reader's `offset_at_time`, another process's chunk age). Named `epoch_ms`, not
`now_ms`, because `now_ms` is the name of the time a caller may pass in its place (append.py).
"""

from __future__ import annotations

import time


def epoch_ms() -> int:
    return time.time_ns() // 1_000_000
