"""Memory of one web worker under large publishes (issue 21: one 300 MiB publish grew a worker by
2.1 GiB and left it 820 MiB bigger). gunicorn with one worker; the same body published `--times`
times; the worker's RSS sampled every 10 ms. Prints, per publish, the worker's RSS before, its
peak and its RSS after, each in MiB, with the peak's growth as a multiple of the body.

Usage: python bench/large_publish.py [--mib 90] [--times 3] [--segments 4]
"""

from __future__ import annotations

import argparse
import http.client
import os
import threading
import time
from pathlib import Path

import orjson
from _common import machine, web_server

EVENT_BYTES = 10_000  # 10 kB events: a 90 MiB body is about 9 400 of them (at most 10 000 a batch)


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def worker_pid(master: int) -> int:
    for _ in range(100):
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.1)
    raise RuntimeError("gunicorn started no worker")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=float, default=90, help="body size (MiB)")
    parser.add_argument("--times", type=int, default=3)
    parser.add_argument("--segments", type=int, default=4)
    args = parser.parse_args()
    count = int(args.mib * 2**20 / (EVENT_BYTES + 40))
    body = orjson.dumps({"events": [{"payload": "x" * EVENT_BYTES, "routing_key": f"k{i}"} for i in range(count)]})
    with web_server(f"large{os.getpid()}", args.segments, ["--timeout", "300"], workers=1) as server:
        pid = worker_pid(server.pid)
        print(f"machine: {machine()}")
        print(
            f"body: {len(body) / 2**20:.1f} MiB ({count} events of {EVENT_BYTES} B on {args.segments} segments), "
            f"one gunicorn worker"
        )
        headers = {"Authorization": f"Token {server.token}", "Content-Type": "application/json"}
        for n in range(1, args.times + 1):
            before, peak, stop = rss_mib(pid), [0.0], threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    peak[0] = max(peak[0], rss_mib(pid))
                    time.sleep(0.01)

            sampler = threading.Thread(target=sample)
            sampler.start()
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
            t0 = time.perf_counter()
            conn.request("POST", server.path, body, headers)
            answer = conn.getresponse()
            answer.read()
            took = time.perf_counter() - t0
            conn.close()
            time.sleep(0.5)  # the worker's post-request work is done
            stop.set()
            sampler.join()
            after = rss_mib(pid)
            if answer.status != 201:
                raise SystemExit(f"publish answered {answer.status}")
            print(
                f"publish {n}: {took:.2f} s; worker RSS {before:.0f} -> peak {peak[0]:.0f} -> after {after:.0f} MiB "
                f"(peak +{peak[0] - before:.0f} MiB = {(peak[0] - before) / (len(body) / 2**20):.1f}x the body, "
                f"after +{after - before:.0f} MiB)"
            )


if __name__ == "__main__":
    main()
