"""Compaction throughput (issue 6) and scale-out (issue 23): N events over K keys with 100-byte
values, published through the segment store and sealed, then one compaction run on Spark
(`compaction.runs.execute`, the same code beat runs). A run includes making the chunks'
Parquet copies (its first Spark job, a task per chunk in the executors): every run starts with
none unless `--keep-copies`. Events/s compacted, bytes in and out, CPU of the driver and of the
executors, peak memory. Target (issue 6): ≥ 500 000 events/s on this machine (`local[2]`).

    .venv/bin/python bench/compaction.py                  # 1M then 10M events, 100k then 1M keys
    .venv/bin/python bench/compaction.py --events 200000 --keys 20000    # a quick run
    .venv/bin/python bench/compaction.py --build-only      # the input alone
    .venv/bin/python bench/compaction.py --keep-input --events 10000000 --runs 3   # reuse it

Scale-out (issue 23: 2 worker cores at least 1.5x faster than 1): each run on a standalone
cluster (`cbrweb.spark_cluster`) of one worker with N cores, executors outside the repository:

    .venv/bin/python bench/compaction.py --keep-input --events 10000000 --cluster 1 2

Several small streams (issue 23: compacted at once faster than one after another): beat's
`compact_due_streams` over S streams of E events, with `CBR_COMPACTION_STREAMS_AT_ONCE` 1, then 4:

    .venv/bin/python bench/compaction.py --small-streams 16 --small-events 20000 --at-once 1 4

A run's first compaction in a process is its JVM's first (class loading, code generation, JIT):
with `--runs N` the later ones show a warm worker; `--warm-up` first does what a worker does at
start (`compaction.runs.warm_up`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import ROOT, StandaloneCluster, cpu_seconds, machine

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
            with contextlib.suppress(psutil.Error):
                total += child.memory_info().rss
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
    from compaction.runs import view_dir
    from streams.logs import stream_log
    from streams.models import Stream

    stream = Stream.objects.filter(name=name).first()
    if stream is None:
        return None
    CompactedView.objects.filter(stream=stream).delete()
    CompactionRun.objects.filter(stream=stream).delete()
    shutil.rmtree(view_dir(stream), ignore_errors=True)
    log = stream_log(stream)
    held = sum(log.segment(s).committed_tail().next_offset for s in stream.segment_ids)
    return stream if held == events else None


def build(name: str, events: int, keys: int):
    """The stream, its events published in batches and every chunk sealed (no Parquet copy: a
    run makes them)."""
    from domain.events import EventIn
    from streams import logs, services
    from streams.logs import seal_active_chunks
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
    return stream, time.monotonic() - started


def drop_copies(stream) -> int:
    """Delete the stream's Parquet copies, so that the next run makes them (copies included)."""
    from streams.logs import stream_log

    paths = stream_log(stream).parquet_paths()
    for path in paths:
        path.unlink()
    return len(paths)


_CLUSTER = None  # the standalone cluster of `--cluster N`, while one runs


def cpu_s() -> dict[str, float]:
    """User + system CPU seconds so far: this process (the driver's Python), its children (the
    Spark JVM; with `local[N]` the executors live in it), and a standalone cluster's executors."""
    import psutil

    me = psutil.Process()
    times = me.cpu_times()
    executors = _CLUSTER.executor_processes() if _CLUSTER is not None else []
    cluster = {p.pid for p in executors} | ({p.pid for p in _CLUSTER.daemons()} if _CLUSTER is not None else set())
    jvm = [p for p in me.children(recursive=True) if p.pid not in cluster]  # the driver's JVM
    return {"driver": times.user + times.system, "jvm": cpu_seconds(jvm), "executors": cpu_seconds(executors)}


def compact_once(stream, keep_copies: bool = False) -> dict:
    from compaction.models import CompactedView, CompactionRun
    from compaction.runs import execute, view_dir
    from spark_tasks.session import get_spark
    from streams.logs import stream_log

    CompactedView.objects.filter(stream=stream).delete()  # the same input every time
    shutil.rmtree(view_dir(stream), ignore_errors=True)
    if not keep_copies:
        drop_copies(stream)
    get_spark()  # started before the clock: a worker keeps its session
    run = CompactionRun.objects.create(stream=stream, trigger="command")
    load = os.getloadavg()[0]
    cpu = cpu_s()
    with PeakRss() as rss:
        started = time.monotonic()
        execute(run, now=datetime.now(UTC) + timedelta(seconds=1))
        seconds = time.monotonic() - started
    after = cpu_s()
    run.refresh_from_db()
    assert run.state == "succeeded", run.error
    return {
        "seconds": seconds,
        "run": run,
        "copies": len(stream_log(stream).parquet_paths()),
        "peak_rss": rss.peak,
        "cpu": {k: after[k] - cpu[k] for k in cpu},
        "load": (load, os.getloadavg()[0]),
    }


def report(got: dict, label: str) -> float:
    run = got["run"]
    rate = run.events_in / got["seconds"]
    cpu = got["cpu"]
    print(
        f"  {label}: compacted in {got['seconds']:.1f} s (copies included: {got['copies']} made): {rate:,.0f} events/s "
        f"({'meets' if rate >= TARGET else 'below'} the {TARGET:,}/s target); CPU driver {cpu['driver']:.1f} s, "
        f"Spark JVM (local: with the executors) {cpu['jvm']:.1f} s, cluster executors {cpu['executors']:.1f} s; "
        f"load {got['load'][0]:.2f} → {got['load'][1]:.2f}; "
        f"{run.events_in:,} → {run.events_out:,} events, {run.keys:,} keys, "
        f"{run.tombstones_dropped:,} tombstones dropped; payload bytes {run.bytes_before:,} → {run.bytes_after:,}; "
        f"peak RSS (process + JVM) {got['peak_rss'] / 2**20:,.0f} MiB",
        flush=True,
    )
    return rate


def small_streams(count: int, events: int, at_once: list[int]) -> None:
    """`count` compacted streams of `events` events each, compacted by beat's task with each
    `CBR_COMPACTION_STREAMS_AT_ONCE`, copies included: wall time of the whole task."""
    from django.conf import settings

    from compaction.models import CompactedView, CompactionRun
    from compaction.runs import view_dir
    from compaction.tasks import compact_due_streams
    from streams.models import Stream

    Stream.objects.filter(cleanup_policy="compact").exclude(name__startswith="small-").delete()
    streams = []
    for i in range(count):
        stream = reusable(f"small-{i}", events)
        if stream is None:
            stream, _ = build(f"small-{i}", events, max(1, events // 10))
        streams.append(stream)
    print(f"{count} streams of {events:,} events each")
    times = {}
    for n in at_once:
        for stream in streams:
            CompactedView.objects.filter(stream=stream).delete()
            CompactionRun.objects.filter(stream=stream).delete()
            shutil.rmtree(view_dir(stream), ignore_errors=True)
            drop_copies(stream)
        settings.CBR_COMPACTION_STREAMS_AT_ONCE = n
        cpu = cpu_s()
        started = time.monotonic()
        done = compact_due_streams()
        times[n] = time.monotonic() - started
        after = cpu_s()
        assert done == count, done
        print(
            f"  {n} at once: {times[n]:.1f} s for {count} streams ({count * events / times[n]:,.0f} events/s); "
            f"CPU driver {after['driver'] - cpu['driver']:.1f} s, Spark JVM {after['jvm'] - cpu['jvm']:.1f} s",
            flush=True,
        )
    if len(times) > 1:
        first, last = at_once[0], at_once[-1]
        print(f"  {last} at once vs {first}: x{times[first] / times[last]:.2f}")


def main() -> None:
    global _CLUSTER
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
    parser.add_argument("--keep-copies", action="store_true", help="runs find the Parquet copies made (the job alone)")
    parser.add_argument("--runs", type=int, default=1, help="compactions of each input (the first is the JVM's first)")
    parser.add_argument("--warm-up", action="store_true", help="warm the session up first, as a worker does at start")
    parser.add_argument(
        "--cluster", type=int, nargs="*", default=None, help="worker cores of a standalone cluster, each in turn"
    )
    parser.add_argument("--executor-memory", default="6g", help="with --cluster: spark.executor.memory")
    parser.add_argument(
        "--small-streams", type=int, default=0, help="instead: this many small streams through beat's task"
    )
    parser.add_argument("--small-events", type=int, default=20_000)
    parser.add_argument("--at-once", type=int, nargs="*", default=[1, 4])
    args = parser.parse_args()
    keys = args.keys or [max(1, n // 10) for n in args.events]
    keep = args.keep_input or args.build_only
    data_dir = Path(args.data_dir)
    if not keep:
        shutil.rmtree(data_dir, ignore_errors=True)
    configure(args.database_url, args.redis_url, data_dir)
    from spark_tasks.session import get_spark

    if args.small_streams:
        print(
            f"# compaction of small streams on {machine()}, Spark {get_spark().version} master {get_spark().sparkContext.master}"
        )
        small_streams(args.small_streams, args.small_events, args.at_once)
        return
    if not args.build_only and not args.cluster:
        print(f"# compaction on {machine()}, Spark {get_spark().version} master {get_spark().sparkContext.master}")
    if args.warm_up:
        from compaction.runs import warm_up

        started, cpu = time.monotonic(), cpu_s()["jvm"]
        warm_up()
        print(f"warm-up: {time.monotonic() - started:.1f} s, JVM CPU {cpu_s()['jvm'] - cpu:.1f} s")
    rows = []
    for n, k in zip(args.events, keys, strict=True):
        stream = reusable(f"c{n}", n) if keep else None
        if stream is None:
            stream, published = build(f"c{n}", n, k)
            print(f"{n:>11,} events / {k:,} keys: published and sealed in {published:.1f} s")
        else:
            print(f"{n:>11,} events / {k:,} keys: input kept from an earlier run")
        if args.build_only:
            continue
        if args.cluster:
            by_cores = {}
            for cores in args.cluster:
                _CLUSTER = StandaloneCluster(cores, memory=args.executor_memory, executor_memory=args.executor_memory)
                try:
                    print(f"# standalone cluster, one worker of {cores} cores, on {machine()}", flush=True)
                    for attempt in range(args.runs):
                        got = compact_once(stream, args.keep_copies)
                        by_cores[cores] = got["seconds"]
                        report(got, f"{cores} cores, run {attempt + 1}")
                finally:
                    _CLUSTER.stop()
                    _CLUSTER = None
            low, high = min(by_cores), max(by_cores)
            if low != high:
                print(f"  {high} cores vs {low}: x{by_cores[low] / by_cores[high]:.2f} (last run of each)")
            continue
        for attempt in range(args.runs):
            got = compact_once(stream, args.keep_copies)
            rows.append((n, k, got["seconds"], report(got, f"run {attempt + 1}")))
        shutil.rmtree(data_dir / "compacted", ignore_errors=True)
    if len({r[0] for r in rows}) > 1:
        (n0, _, s0, r0), (n1, _, s1, r1) = rows[0], rows[-1]
        print(f"scaling: ×{n1 / n0:.0f} events took ×{s1 / s0:.1f} the time ({r0:,.0f} → {r1:,.0f} events/s)")


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
