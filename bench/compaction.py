"""Compaction throughput (issue 6): N events over K keys with 100-byte values, published through
the segment store, sealed with their Parquet copies, then one compaction run on Spark
(`compaction.runs.execute`, the same code beat runs) — events/s compacted, bytes in and out, peak
memory of the process and its Spark JVM. Target: ≥ 500 000 events/s on this machine
(`local[2]`); the same job at 1M and 10M events shows its scaling.

    .venv/bin/python bench/compaction.py                  # 1M then 10M events, 100k then 1M keys
    .venv/bin/python bench/compaction.py --events 200000 --keys 20000    # a quick run
    .venv/bin/python bench/compaction.py --build-only      # the input alone (under the shared lock)
    .venv/bin/python bench/compaction.py --keep-input --events 10000000 --runs 3   # reuse it

A run's first compaction in a process is its JVM's first (class loading, code generation, JIT):
with `--runs N` the later ones show a warm worker; `--warm-up` first does what a worker does at
start (`compaction.runs.warm_up`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import ROOT, cpu_seconds, machine

TARGET = 500_000
BATCH = 10_000


def configure(database_url: str, redis_url: str, data_dir: Path) -> None:
    os.environ.update(
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        CBR_DATA_DIR=str(data_dir),
        DJANGO_SETTINGS_MODULE="cbrweb.settings",
        SPARK_MASTER=os.environ.get("SPARK_MASTER", "local[2]"),
    )
    os.environ.setdefault("CBR_FSYNC", "never")  # building the input; the run's own writes fsync
    os.environ.setdefault("CBR_CHUNK_BYTES", str(64 * 2**20))
    os.environ.setdefault("CBR_SPARK_DRIVER_MEMORY", "6g")
    if database_url.startswith("postgres"):
        import psycopg

        name = database_url.rsplit("/", 1)[1]
        with psycopg.connect(database_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
                conn.execute(f'CREATE DATABASE "{name}"')
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


class PeakRss:
    """Samples the resident memory of this process and its children (the Spark JVM)."""

    def __init__(self):
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _tree_rss() -> int:
        import psutil

        me = psutil.Process()
        total = me.memory_info().rss
        for child in me.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:
                pass
        return total

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._tree_rss())
            time.sleep(0.2)

    def __enter__(self):
        self.peak = self._tree_rss()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def reusable(name: str, events: int):
    """The stream built by an earlier `--keep-input` run with all its events sealed, its view
    and run history reset; None when there is none."""
    from compaction.models import CompactedView, CompactionRun
    from compaction.runs import input_counts, pending_chunks, view_dir
    from streams.models import Stream

    stream = Stream.objects.filter(name=name).first()
    if stream is None:
        return None
    CompactedView.objects.filter(stream=stream).delete()
    CompactionRun.objects.filter(stream=stream).delete()
    shutil.rmtree(view_dir(stream), ignore_errors=True)
    pending = pending_chunks(stream, {}, int(time.time() * 1000) + 86_400_000)
    return stream if input_counts(pending.paths).events == events else None


def build(name: str, events: int, keys: int):
    """The stream, its events published in batches and every chunk sealed with its Parquet copy."""
    from compaction.runs import seal_active_chunks
    from domain.events import EventIn
    from streams import logs, services
    from streams.models import Stream

    Stream.objects.filter(name=name).delete()
    stream = services.do_create_stream(
        scope="bench", name=name, segment_count=2, cleanup_policy="compact", compaction={"delete_retention_s": 0}
    )
    value = b"v" * 100
    started = time.monotonic()
    log = logs.stream_log(stream)
    for first in range(0, events, BATCH):
        batch = []
        for i in range(first, min(events, first + BATCH)):
            key = f"key-{(i * 7919) % keys:08d}".encode()
            batch.append(EventIn(value if i % 50 else b"", routing_key=key, key=key))  # 2% tombstones
        log.append(batch)
    seal_active_chunks(stream)
    published = time.monotonic() - started
    started = time.monotonic()
    copies = logs.seal_due_chunks(stream)
    return stream, published, time.monotonic() - started, copies


def jvm_cpu_s() -> float:
    """User + system CPU seconds of this process's children (the Spark JVM) so far."""
    import psutil

    return cpu_seconds(psutil.Process().children(recursive=True))


def compact_once(stream) -> dict:
    from compaction.models import CompactedView, CompactionRun
    from compaction.runs import execute, view_dir
    from spark_tasks.session import get_spark

    CompactedView.objects.filter(stream=stream).delete()  # the same input every time
    shutil.rmtree(view_dir(stream), ignore_errors=True)
    get_spark()  # started before the clock: a worker keeps its session
    run = CompactionRun.objects.create(stream=stream, trigger="command")
    load = os.getloadavg()[0]
    cpu = jvm_cpu_s()
    with PeakRss() as rss:
        started = time.monotonic()
        execute(run, now=datetime.now(UTC) + timedelta(seconds=1))
        seconds = time.monotonic() - started
    run.refresh_from_db()
    assert run.state == "succeeded", run.error
    return {
        "seconds": seconds,
        "run": run,
        "peak_rss": rss.peak,
        "jvm_cpu": jvm_cpu_s() - cpu,
        "load": (load, os.getloadavg()[0]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="*", default=[1_000_000, 10_000_000])
    parser.add_argument("--keys", type=int, nargs="*", default=None, help="one per --events (default: events / 10)")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/cbr_bench_compaction")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/5")
    parser.add_argument("--data-dir", default="/tmp/cbr-bench-compaction")
    parser.add_argument(
        "--keep-input",
        action="store_true",
        help="reuse the streams (and data dir) an earlier run built for the same sizes",
    )
    parser.add_argument("--build-only", action="store_true", help="build the input and stop (implies --keep-input)")
    parser.add_argument("--runs", type=int, default=1, help="compactions of each input (the first is the JVM's first)")
    parser.add_argument("--warm-up", action="store_true", help="warm the session up first, as a worker does at start")
    args = parser.parse_args()
    keys = args.keys or [max(1, n // 10) for n in args.events]
    keep = args.keep_input or args.build_only
    data_dir = Path(args.data_dir)
    if not keep:
        shutil.rmtree(data_dir, ignore_errors=True)
    configure(args.database_url, args.redis_url, data_dir)
    from spark_tasks.session import get_spark

    if not args.build_only:
        print(f"# compaction on {machine()}, Spark {get_spark().version} master {get_spark().sparkContext.master}")
    if args.warm_up:
        from compaction.runs import warm_up

        started, cpu = time.monotonic(), jvm_cpu_s()
        warm_up()
        print(f"warm-up: {time.monotonic() - started:.1f} s, JVM CPU {jvm_cpu_s() - cpu:.1f} s")
    rows = []
    for n, k in zip(args.events, keys, strict=True):
        stream = reusable(f"c{n}", n) if keep else None
        if stream is None:
            stream, published, copied, copies = build(f"c{n}", n, k)
            print(
                f"{n:>11,} events / {k:,} keys: published in {published:.1f} s, {copies} Parquet copies in {copied:.1f} s"
            )
        else:
            print(f"{n:>11,} events / {k:,} keys: input kept from an earlier run")
        if args.build_only:
            continue
        for attempt in range(args.runs):
            got = compact_once(stream)
            run = got["run"]
            rate = run.events_in / got["seconds"]
            rows.append((n, k, got["seconds"], rate, run, got["peak_rss"]))
            print(
                f"  run {attempt + 1}: compacted in {got['seconds']:.1f} s: {rate:,.0f} events/s "
                f"({'meets' if rate >= TARGET else 'below'} the {TARGET:,}/s target); JVM CPU {got['jvm_cpu']:.1f} s; "
                f"load {got['load'][0]:.2f} → {got['load'][1]:.2f}; "
                f"{run.events_in:,} → {run.events_out:,} events, {run.keys:,} keys, "
                f"{run.tombstones_dropped:,} tombstones dropped; payload bytes {run.bytes_before:,} → {run.bytes_after:,}; "
                f"peak RSS (process + JVM) {got['peak_rss'] / 2**20:,.0f} MiB",
                flush=True,
            )
        shutil.rmtree(data_dir / "compacted", ignore_errors=True)
    if len({r[0] for r in rows}) > 1:
        (n0, _, s0, r0, *_), (n1, _, s1, r1, *_) = rows[0], rows[-1]
        print(f"scaling: ×{n1 / n0:.0f} events took ×{s1 / s0:.1f} the time ({r0:,.0f} → {r1:,.0f} events/s)")


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
