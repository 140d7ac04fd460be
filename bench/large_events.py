"""Large events (issue 43, point 2): one event of `--mib` MiB published from a file
(`POST …/events/raw/`, the Python client's `publish_large`) and read back (`GET …/payload/`),
`--times` times, against the web server as `make run` starts it but with one worker, whose RSS
is sampled every 10 ms. Prints, per round, the upload's and the download's time and MiB/s, and
the worker's peak RSS growth over its RSS before each, in MiB and in 1 MiB pieces.

Usage: python bench/large_events.py [--mib 64] [--times 3]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import threading
import time
from pathlib import Path

from _common import machine, web_server
from large_publish import rss_mib, worker_pid

from cbr_client import Client


def sampled(pid: int, action) -> tuple[float, float, object]:
    """`action()`'s seconds, the worker's peak RSS growth (MiB) meanwhile, and its result."""
    before, peak, stop = rss_mib(pid), [0.0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mib(pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.perf_counter()
    try:
        result = action()
    finally:
        took = time.perf_counter() - start
        stop.set()
        sampler.join()
    return took, max(0.0, peak[0] - before), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--times", type=int, default=3)
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile() as f:
        for i in range(args.mib):
            f.write(os.urandom(2**20) if i % 8 == 0 else bytes([i % 251]) * 2**20)
        f.flush()
        path = Path(f.name)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        with web_server(f"large{os.getpid()}", 1, ["--timeout", "300"], workers=1) as server:
            pid = worker_pid(server.pid)
            stream = server.path.split("/streams/")[1].removesuffix("/events/")
            cbr = Client(f"http://127.0.0.1:{server.port}", token=server.token, timeout=300)
            cbr.publish(stream, ["warm"])
            print(f"machine: {machine()}")
            print(f"one event of {args.mib} MiB, from a file; one gunicorn worker (its RSS sampled every 10 ms)")
            print("round  upload s  MiB/s  peak +MiB  |  download s  MiB/s  peak +MiB")
            for n in range(1, args.times + 1):
                with open(path, "rb") as source:
                    up_s, up_peak, position = sampled(pid, lambda source=source: cbr.publish_large(stream, source))

                def download(url=position["payload_url"]) -> str:  # type: ignore[index]
                    got = hashlib.sha256()
                    for piece in cbr.payload(url):
                        got.update(piece)
                    return got.hexdigest()

                down_s, down_peak, got = sampled(pid, download)
                assert got == digest, "the payload read back differs"
                print(
                    f"{n:5d}  {up_s:8.2f}  {args.mib / up_s:5.0f}  {up_peak:9.1f}  |  {down_s:10.2f}  "
                    f"{args.mib / down_s:5.0f}  {down_peak:9.1f}"
                )


if __name__ == "__main__":
    main()
