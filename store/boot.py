"""This host's boot, as the kernel names it: the id a segment's tail is stamped with (the
segment's recovery trusts a tail of this boot without a check past it) and a part of a Redis
lock holder's name (store/locks.py). It must never be shared by two hosts, nor by two boots of
one host: where the kernel's id cannot be read, each process takes a random one instead.

The segment's modules read it as `boot.BOOT_ID` at each use rather than importing the name, so
that a test that plays another host (tests/storage/test_hosts.py) replaces it in one place.
"""

from __future__ import annotations

import os
from pathlib import Path


def _boot_id() -> bytes:
    """This host's boot, as the kernel names it; where it cannot be read (not Linux), a random
    id of this process: every other process's tail then looks foreign, which costs a check past
    the tail at each change of writer process but is always safe (two hosts never share an id)."""
    try:
        raw = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")
        return bytes.fromhex(raw)[:16].ljust(16, b"\0")
    except (OSError, ValueError):
        return os.urandom(16)


BOOT_ID = _boot_id()
