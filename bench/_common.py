"""Helpers shared by the benchmark scripts: the machine's description and a temporary server."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def machine() -> str:
    cpu = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Python {platform.python_version()}, {platform.system()}"


def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def manage(env: dict, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args], env=env, cwd=ROOT, check=True,
        capture_output=True, text=True,
    )
    return out.stdout


def cpu_seconds(procs) -> float:
    """User + system CPU seconds used so far by the psutil processes `procs` (those gone skipped)."""
    import psutil

    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


def postgres_cpu_seconds() -> float:
    """User + system CPU seconds used so far by PostgreSQL on this machine: its live processes,
    plus the backends that have exited (their time is added to the postmaster's children's). A
    sum over live processes alone can go down between two samples, as backends come and go."""
    import psutil

    total = 0.0
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] not in ("postgres", "postmaster"):
            continue
        try:
            times = proc.cpu_times()
            total += times.user + times.system
            if proc.ppid() == 1 or proc.parent().name() not in ("postgres", "postmaster"):  # the postmaster
                total += times.children_user + times.children_system
        except psutil.Error:
            continue
    return total
