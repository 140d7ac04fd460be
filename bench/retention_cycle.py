"""The whole retention cycle, end to end: database, store, decision and truncations applied.

A synthetic fleet of N streams, each with 4 segments holding 96 events of 100 bytes apiece in the
real segment store (with --scaled-share, that part of the streams scaled through three epochs
after: segment 0 split, its parts merged, segment 2 split; 9 segments, 4 of them sealed), a consumption-based size or time policy (alternating), 3 subscriber reader
groups with acknowledgement cuts, and a retention set of 48 records (one per past 30-minute cycle; one row per stream).
One cycle is then timed as the beat task runs it (`retention.cycle.running.run_cycle`), for each engine
asked for, each from the same freshly built fleet (restored from a snapshot for the second).

Usage: python bench/retention_cycle.py [--sizes 10000,100000] [--engines local,spark,spark-planned,cluster:1,cluster:2]
(`cluster:N`: the Spark engine on a standalone cluster of one worker with N cores, started for the
run from the pyspark package; CPU is reported for the driver and the executors apart)
       [--database-url postgres://postgres@127.0.0.1:5432/cbr_bench] [--redis-url redis://127.0.0.1:6379/14]
The database named in the URL is created if missing and emptied before each fleet.
A 100k fleet takes ~25 minutes to build on 2 cores: build it with `--build-only` (no timing, no
need for the benchmark lock's exclusive hold), then time it with `--reuse` (add `--in-place` for
the first run after the build, which then skips restoring the snapshot).
The 1M fleet (bench/RESULTS.md, 2026-11-24/25, says why and how the disk is set up):
  --sizes 1000000 --build-only --event-bytes 4 --light-snapshot --build-processes 2 --data-dir /mnt/fleet/bench-1m
then time it with --reuse --quick-restore (a light snapshot restores only that way).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _common import ROOT, StandaloneCluster, machine, postgres_cpu_seconds

SEGMENTS = ("0", "1", "2", "3")
EVENTS = 96  # per segment
EVENT_BYTES = 100  # --event-bytes; the size policies' bounds scale with it, so the decisions do not change
RECORDS = 48
BATCH = EVENTS  # events a segment's append takes while building (--chunk-bytes: fewer, so chunks roll)
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def configure(database_url: str, redis_url: str, data_dir: Path) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ["REDIS_URL"] = redis_url
    os.environ["CBR_DATA_DIR"] = str(data_dir)
    # building the fleet appends without fsync (the cycle's own syncs do not depend on it)
    os.environ.setdefault("CBR_FSYNC", "never")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbrweb.settings")
    if database_url.startswith("postgres"):
        import psycopg

        name = database_url.rsplit("/", 1)[1]
        admin = database_url.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
                conn.execute(f'CREATE DATABASE "{name}"')
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def empty(data_dir: Path) -> None:
    from django.db import connection

    from groups.models import ReaderGroup, Subscription
    from retention.models import (
        RetentionCycle,
        RetentionPolicy,
        StoredRetentionSet,
        TruncationRecord,
    )
    from streams.models import Scope, Segment, Stream

    for model in (
        TruncationRecord,
        StoredRetentionSet,
        RetentionCycle,
        Subscription,
        RetentionPolicy,
        Segment,
        ReaderGroup,
        Stream,
        Scope,
    ):
        if connection.vendor == "postgresql":
            with connection.cursor() as cur:
                cur.execute(f'TRUNCATE "{model._meta.db_table}" CASCADE')
        else:
            model.objects.all().delete()
    shutil.rmtree(data_dir, ignore_errors=True)


STEP = 1000  # streams built per batch


def build_fleet(n: int, processes: int = 1) -> None:
    """N streams in the database and the store; cuts and sizes consistent between the two.
    `processes`: forked builders, each taking every `processes`-th batch (a 1M fleet)."""
    from django.db import connections

    from groups.models import ReaderGroup, Subscription
    from streams.models import Scope

    scope = Scope.objects.create(name="fleet")
    groups = [
        ReaderGroup.objects.create(scope=scope, name=f"g{i}", retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT")
        for i in range(3)
    ]
    if processes <= 1:
        _build_batches(n, scope, groups, range(0, n, STEP))
    else:
        connections.close_all()
        children = []
        for i in range(processes):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    _build_batches(n, scope, groups, range(i * STEP, n, STEP * processes))
                    code = 0
                except BaseException:
                    import traceback

                    traceback.print_exc()
                finally:
                    connections.close_all()
                    sys.stderr.flush()
                    os._exit(code)
            children.append(pid)
        failed = [pid for pid in children if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0]
        if failed:
            raise SystemExit(f"fleet builders {failed} failed")
    t = time.perf_counter()
    Subscription.objects.update(created_at=NOW - timedelta(days=1))
    os.sync()  # the fleet's own writes are not the cycle's to flush
    analyze()
    print(f"\n  batches built; update, sync and analyze took {time.perf_counter() - t:.0f} s", file=sys.stderr)


SCALED_SHARE = 0.0  # --scaled-share: the part of the fleet scaled through three epochs


def _scale_three_times(stream) -> list[str]:
    """A built stream's layout after three scales (split 0, merge its parts, split 2), with the
    sealed segments sealed in the store as a scale leaves them: its new segments' ids."""
    from domain.segment_layout import Layout
    from streams.logs import stream_log

    layout = Layout.fixed(len(SEGMENTS))
    steps = [(["0"], [[0, 0.125], [0.125, 0.25]]), (["4", "5"], [[0, 0.25]]), (["2"], [[0.5, 0.625], [0.625, 0.75]])]
    for seal, ranges in steps:
        layout = layout.scale(seal, ranges, layout.new_ids(len(ranges))).layout
    stream.scaled_segments = layout.rows()
    stream.epoch = layout.epoch
    stream.segment_count = len(layout.active_ids)
    log = stream_log(stream)
    for sid in layout.ids:
        if sid not in SEGMENTS:
            log.segment(sid).create()
    for sid in layout.ids:
        if layout.is_sealed(sid):
            log.segment(sid).seal()
    return [sid for sid in layout.ids if sid not in SEGMENTS]


def _build_batches(n: int, scope, groups, starts: range) -> None:
    from domain.events import EventIn
    from groups.models import Subscription
    from retention.models import RetentionPolicy, StoredRetentionSet
    from retention.set_store import stored
    from streams.logs import stream_log
    from streams.models import Segment, Stream

    payload = [EventIn(b"x" * EVENT_BYTES)] * EVENTS
    for start in starts:
        streams = Stream.objects.bulk_create(
            [
                Stream(scope=scope, name=f"s{k:07d}", segment_count=len(SEGMENTS))
                for k in range(start, min(n, start + STEP))
            ]
        )
        policies, segments, subs, records = [], [], [], []
        for stream in streams:
            rng = random.Random(stream.name)
            log = stream_log(stream)
            for seg in SEGMENTS:
                for at in range(0, EVENTS, BATCH):  # a batch at a time: a chunk rolls only between appends
                    log.segment(seg).append(payload[at : at + BATCH])
                segments.append(
                    Segment(stream=stream, segment_id=seg, tail_offset=EVENTS, tail_size=EVENTS * EVENT_BYTES)
                )
            if rng.random() < SCALED_SHARE:
                for sid in _scale_three_times(stream):
                    segments.append(Segment(stream=stream, segment_id=sid))
                Stream.objects.filter(pk=stream.pk).update(
                    scaled_segments=stream.scaled_segments, epoch=stream.epoch, segment_count=stream.segment_count
                )
            if rng.random() < 0.5:
                policies.append(
                    RetentionPolicy(
                        stream=stream,
                        limit_type="size",
                        min_value=50 * EVENT_BYTES,
                        max_value=200 * EVENT_BYTES,
                        consumption_based=True,
                        subscriber_timeout_s=3600,
                    )
                )
            else:
                policies.append(
                    RetentionPolicy(
                        stream=stream,
                        limit_type="time",
                        min_value=3600,
                        max_value=12 * 3600,
                        consumption_based=True,
                        subscriber_timeout_s=3600,
                    )
                )
            rset = []
            for k in range(1, RECORDS + 1):
                cut = {s: 2 * k - 1 for s in SEGMENTS}
                at = NOW - timedelta(seconds=(RECORDS + 1 - k) * 1800)
                rset.append(
                    stored(at, sum(cut.values()) * EVENT_BYTES, cut, {s: o * EVENT_BYTES for s, o in cut.items()})
                )
            records.append(StoredRetentionSet(stream=stream, records=rset))
            for group in groups:
                cut = {s: rng.randint(EVENTS // 3, EVENTS) for s in SEGMENTS}
                subs.append(
                    Subscription(
                        reader_group=group,
                        stream=stream,
                        acknowledgement_cut=cut,
                        acknowledgement_sizes={s: o * EVENT_BYTES for s, o in cut.items()},
                        acknowledged_at=NOW - timedelta(seconds=rng.randint(0, 600)),
                    )
                )
        RetentionPolicy.objects.bulk_create(policies)
        Segment.objects.bulk_create(segments)
        Subscription.objects.bulk_create(subs)
        StoredRetentionSet.objects.bulk_create(records, batch_size=500)
        print(f"\r  built the batch at {start:,} of {n:,} streams", end="", file=sys.stderr, flush=True)


def analyze() -> None:
    """Table statistics, as autovacuum keeps them on a live database: without them PostgreSQL
    plans the cycle's `IN (500 ids)` lookups over a table it believes empty."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("ANALYZE")


def snapshot(database_url: str, data_dir: Path, light: bool = False) -> None:
    """Keep the fleet as built, so that each engine starts from the same state without building
    it again (a 100k fleet takes minutes to build): a copy of the store directory and, on
    PostgreSQL, a template database (SQLite: a copy of the file). `light`: of the store, only the
    streams' `ends` files, in one file (a 1M fleet's store does not fit twice on the disk); such a
    snapshot is restored with --quick-restore only."""
    _copy(database_url, data_dir, to_snapshot=True, ends_only=light)


def restore(database_url: str, data_dir: Path, quick: bool = False) -> None:
    """The snapshot back in place, its schema brought up to date (a fleet built by older code).
    `quick`: only each stream's `ends` file is copied back (and the database): enough after cycles
    that deleted no chunk, which moved heads only (this fleet's chunks all hold the tail; the
    cycle's history says, and a quick restore after one that deleted chunks is refused)."""
    from django.core.management import call_command

    if quick:
        if _deleted_chunks():
            raise SystemExit("--quick-restore: the last cycle deleted chunks; restore the whole store")
        _copy(database_url, data_dir, to_snapshot=False, ends_only=True)
    else:
        if (data_dir.with_name(data_dir.name + "-snapshot") / "ends.pickle").exists():
            raise SystemExit("the snapshot is light (only the `ends` files): restore it with --quick-restore")
        _copy(database_url, data_dir, to_snapshot=False)
    call_command("migrate", verbosity=0)


def _deleted_chunks() -> int:
    from django.db.models import Sum

    from retention.models import TruncationRecord

    return TruncationRecord.objects.aggregate(n=Sum("chunks_deleted"))["n"] or 0


def _copy(database_url: str, data_dir: Path, to_snapshot: bool, ends_only: bool = False) -> None:
    from django.db import connections

    connections.close_all()
    saved = data_dir.with_name(data_dir.name + "-snapshot")
    source, target = (data_dir, saved) if to_snapshot else (saved, data_dir)
    if ends_only:
        _copy_ends(source, target, to_snapshot)
    else:
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run(["cp", "-a", str(source), str(target)], check=True)
    if database_url.startswith("postgres"):
        import psycopg

        name = database_url.rsplit("/", 1)[1]
        admin = database_url.rsplit("/", 1)[0] + "/postgres"
        src, dst = (name, f"{name}_snapshot") if to_snapshot else (f"{name}_snapshot", name)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dst}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{dst}" TEMPLATE "{src}"')
    else:
        path = Path(database_url.removeprefix("sqlite:///"))
        snap = path.with_name(path.name + ".snapshot")
        shutil.copyfile(*((path, snap) if to_snapshot else (snap, path)))


def _copy_ends(source: Path, target: Path, to_snapshot: bool) -> None:
    """The streams' `ends` files, from the store to the snapshot or back. A snapshot made whole
    (`cp -a`) holds them in place; a light one, as one pickled file (`ends.pickle`)."""
    import pickle

    packed = (target if to_snapshot else source) / "ends.pickle"
    if to_snapshot:
        shutil.rmtree(target, ignore_errors=True)  # an earlier fleet's snapshot, whole or light
        target.mkdir(parents=True)
        ends = {p.parent.name: p.read_bytes() for p in (source / "streams").glob("*/ends")}
        packed.write_bytes(pickle.dumps(ends, protocol=pickle.HIGHEST_PROTOCOL))
    elif packed.exists():
        for name, data in pickle.loads(packed.read_bytes()).items():
            (target / "streams" / name / "ends").write_bytes(data)
    else:
        for ends in (source / "streams").glob("*/ends"):
            shutil.copyfile(ends, target / "streams" / ends.parent.name / "ends")


_PHASES = (
    ("retention.cycle.gathering", "prepare_batch"),
    ("retention.cycle.buckets", "decide"),
    ("retention.truncation", "truncate_many"),
    ("retention.truncation", "_complete"),
    ("retention.cycle.applying", "_mark_full"),
    ("retention.cycle.gathering", "read_sets"),
    ("retention.cycle.applying", "write_sets"),
    ("retention.cycle.gathering", "ends_many"),
    ("retention.truncation", "retire_passed_many"),  # scaled streams: sealed segments passed whole
)
_NESTED = {"read_sets", "ends_many"}  # parts of prepare_batch's time, not besides it
_saved: list = []


def _time_phases() -> dict[str, float]:
    """Wrap the cycle's steps with timers (seconds spent in each, summed over batches)."""
    import functools
    import importlib

    spent: dict[str, float] = {}
    for module_name, name in _PHASES:
        module = importlib.import_module(module_name)
        original = getattr(module, name, None)
        if original is None:
            continue
        _saved.append((module, name, original))

        def timed(*a, _f=original, _n=name, **kw):
            t = time.perf_counter()
            try:
                return _f(*a, **kw)
            finally:
                spent[_n] = spent.get(_n, 0.0) + time.perf_counter() - t

        functools.update_wrapper(timed, original)
        setattr(module, name, timed)
    return spent


def _untime_phases() -> None:
    while _saved:
        module, name, original = _saved.pop()
        setattr(module, name, original)


def run(n: int, engine: str, at: datetime = NOW) -> dict:
    from django.db import connection

    from retention.cycle.running import run_cycle_summary
    from retention.models import TruncationRecord

    phases = _time_phases()
    cpu0 = _cpu()
    t0 = time.perf_counter()
    marks = []

    def progress(done: int, total: int) -> None:
        if done // 10_000 > len(marks):  # seconds at every 10k streams: linear or not
            marks.append(round(time.perf_counter() - t0, 1))

    summary = run_cycle_summary(now=at, engine=engine, trigger="command", progress=progress)
    elapsed = time.perf_counter() - t0
    cpu = {k: v - cpu0[k] for k, v in _cpu().items()}
    _untime_phases()
    assert summary.streams == n, summary.streams
    assert TruncationRecord.objects.filter(completed=True, created_at=at).count() == summary.truncations
    return {
        "seconds": elapsed,
        "phases": dict(phases),
        "marks": marks,
        "truncated": summary.truncations,
        "rules": dict(summary.rules),
        "vendor": connection.vendor,
        "cpu": cpu,
        "rss": _peak_rss(),
    }


def _peak_rss() -> dict[str, float]:
    """Peak resident memory in MB of this process (the cycle's, which lists the streams and counts
    the outcomes) and of its largest finished child (a cycle's worker process, or a fleet
    builder): Linux reports KB."""
    import resource

    return {
        "cycle": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "largest child": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def _cpu() -> dict[str, float]:
    """CPU seconds (user + system) used so far by this process (the cycle's driver), by its
    descendants (Spark's JVM and its Python workers: the executors of `local[N]`) with its
    finished children, and by PostgreSQL when it runs on this machine: its live processes plus
    the backends that have exited (their time is added to the postmaster's children's)."""
    import resource

    import psutil

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    spark = kids.ru_utime + kids.ru_stime
    procs = psutil.Process().children(recursive=True)
    if _CLUSTER is not None:  # a standalone cluster's executors
        procs += _CLUSTER.executor_processes()
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        _DESCENDANTS[proc.pid] = times.user + times.system
    # a descendant that ended (Spark ends idle Python workers) keeps the CPU it was last seen with:
    # its time goes to its parent (the JVM), not to this process, so it would vanish from the sum
    spark += sum(_DESCENDANTS.values())
    driver = own.ru_utime + own.ru_stime
    return {"cycle": driver + spark, "driver": driver, "executors": spark, "postgres": postgres_cpu_seconds()}


_CLUSTER = None  # the standalone cluster an engine `cluster:N` runs on
_DESCENDANTS: dict[int, float] = {}  # CPU seconds of every descendant process seen, by pid


def _on_cluster(cores: int) -> None:
    """Stop this process's Spark session, start a standalone cluster (one worker of `cores`
    cores) and a session on it."""
    global _CLUSTER
    _off_cluster()
    _CLUSTER = StandaloneCluster(cores)


def _off_cluster() -> None:
    global _CLUSTER
    if _CLUSTER is not None:
        _CLUSTER.stop()
        _CLUSTER = None


def offload_everything(n: int) -> None:
    """Copy every sealed chunk of the fleet to the tier and release the local copies (beat's
    offload round, CBR_TIER_LOCAL_KEEP_S 0), timed; then time the rounds that find nothing to do:
    with the worker's memory of each stream (as beat's next minute) and without (a worker just
    started)."""
    from streams import tiering
    from streams.tiering import offload

    t0 = time.perf_counter()
    done = tiering.offload_due()
    took = time.perf_counter() - t0
    print(
        f"offload: {done.objects:,} files ({done.bytes / 2**20:,.1f} MiB) copied and {done.released:,} chunks released"
        f" in {took:.1f} s ({done.objects / took:,.0f} files/s, {done.bytes / 2**20 / took:.1f} MiB/s)"
    )
    for memory in ("remembered", "forgotten"):
        if memory == "forgotten":
            offload._UNCHANGED.seen.clear()
        t0 = time.perf_counter()
        again = tiering.offload_due()
        took = time.perf_counter() - t0
        print(
            f"offload round with nothing to do, each stream {memory}: {took:.2f} s for {n:,} streams"
            f" ({1e6 * took / n:,.0f} µs a stream; {again.objects} copied)"
        )


def main() -> None:
    global EVENT_BYTES, SCALED_SHARE, BATCH
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument(
        "--cycles",
        type=int,
        default=1,
        help="cycles timed one after the other, 30 minutes apart (a fleet's steady state)",
    )
    parser.add_argument("--engines", default="local,spark")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/cbr_bench")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--data-dir", default=str(ROOT / "var" / "bench-cycle"))
    parser.add_argument(
        "--reuse", action="store_true", help="start from the snapshot of an earlier run's fleet of the same size"
    )
    parser.add_argument(
        "--in-place",
        action="store_true",
        help="with --reuse: the fleet in place is still as built (a --build-only run just "
        "made it): the first engine starts from it without restoring the snapshot",
    )
    parser.add_argument(
        "--quick-restore",
        action="store_true",
        help="with --reuse: restore the database and only the streams' `ends` files (seconds, "
        "not the minutes of copying a 100k store), valid after cycles that deleted no chunk",
    )
    parser.add_argument(
        "--event-bytes",
        type=int,
        default=EVENT_BYTES,
        help="payload bytes of each event; the size policies' bounds scale with it, so the "
        "decisions are the same as with 100 (a smaller store: the 1M fleet)",
    )
    parser.add_argument(
        "--build-processes", type=int, default=1, help="processes building the fleet (untimed; the 1M fleet)"
    )
    parser.add_argument(
        "--light-snapshot",
        action="store_true",
        help="snapshot only the streams' `ends` files of the store (restore with --quick-restore)",
    )
    parser.add_argument(
        "--build-only",
        action="store_true",
        help="build the fleet and its snapshot, time nothing (then time with --reuse, "
        "under the benchmark lock, without the build's minutes)",
    )
    parser.add_argument(
        "--scaled-share",
        type=float,
        default=0.0,
        help="the part of the fleet whose streams scaled through three epochs (split, merge, split; "
        "issue 41's benchmark: 0.5 against 0)",
    )
    parser.add_argument(
        "--chunk-bytes",
        type=int,
        default=0,
        help="CBR_CHUNK_BYTES while building (small: each segment's events in several sealed chunks)",
    )
    parser.add_argument(
        "--tier",
        choices=["", "file"],
        default="",
        help="issue 42's benchmark: after building, every sealed chunk is copied to a file tier (under the "
        "data directory) and its local copy released, so the cycle's truncations delete tiered chunks",
    )
    args = parser.parse_args()
    if args.chunk_bytes:
        os.environ["CBR_CHUNK_BYTES"] = str(args.chunk_bytes)
        BATCH = max(1, args.chunk_bytes // (2 * EVENT_BYTES))
    if args.tier:
        os.environ["CBR_TIER_URL"] = f"file://{Path(args.data_dir) / 'tier'}"
        os.environ["CBR_TIER_LOCAL_KEEP_S"] = "0"
    EVENT_BYTES = args.event_bytes
    SCALED_SHARE = args.scaled_share
    os.environ.setdefault("SPARK_MASTER", args.master)
    data_dir = Path(args.data_dir)
    configure(args.database_url, args.redis_url, data_dir)
    from django.conf import settings

    print(f"machine: {machine()}")
    print(
        f"database: {args.database_url}; store: {data_dir} (fsync {settings.CBR_FSYNC}); Spark master {settings.SPARK_MASTER}"
    )
    print(
        f"fleet: {len(SEGMENTS)} segments x {EVENTS} events of {EVENT_BYTES} B, 3 subscribers, {RECORDS} retention records per stream"
    )
    results = {}
    for n in [int(x) for x in args.sizes.split(",")]:
        marker = data_dir.with_name(data_dir.name + "-snapshot") / "fleet-size"
        fleet = f"{n}" if not SCALED_SHARE else f"{n} scaled {SCALED_SHARE}"
        fleet += f" chunks {args.chunk_bytes} tier {args.tier or 'none'}"
        if args.reuse and marker.exists() and marker.read_text() == fleet:
            built = 0.0
            if not args.in_place:
                restore(args.database_url, data_dir, quick=args.quick_restore)
            os.sync()
            analyze()
        else:
            empty(data_dir)
            t0 = time.perf_counter()
            build_fleet(n, args.build_processes)
            built = time.perf_counter() - t0
            if args.tier:
                offload_everything(n)
            snapshot(args.database_url, data_dir, light=args.light_snapshot)
            marker.write_text(fleet)
        if args.build_only:
            print(f"N={n:>9,}  fleet built in {built:.0f} s (snapshot kept; nothing timed)")
            continue
        for i, engine in enumerate(args.engines.split(",")):
            if i:
                restore(args.database_url, data_dir, quick=args.quick_restore)
                os.sync()
                analyze()
            from django.conf import settings

            # spark-planned: the engine as on a cluster without a shared file system (the driver
            # reads the ends and applies what the executors planned)
            settings.CBR_SPARK_SHARED_STORE = engine != "spark-planned"
            if engine in ("spark", "spark-planned"):  # a worker keeps its session: start it outside the timing
                from spark_tasks.session import get_spark

                get_spark()
            if engine.startswith("cluster:"):  # a standalone cluster whose worker has N cores
                _on_cluster(int(engine.partition(":")[2]))
            for c in range(args.cycles):  # --cycles: the next ones 30 minutes apart, as beat runs them
                at = NOW + timedelta(minutes=30 * c)
                r = run(n, "spark" if engine.startswith("cluster:") or engine == "spark-planned" else engine, at)
                results.setdefault((n, engine), r["seconds"])  # the first cycle compares sizes
                top = ", ".join(f"{k} {v:,}" for k, v in sorted(r["rules"].items(), key=lambda kv: -kv[1])[:4])
                print(
                    f"N={n:>9,}  engine {engine:<5}  cycle {c + 1} {r['seconds']:7.1f} s  {n / r['seconds']:8,.0f} streams/s"
                    f"  truncated {r['truncated']:,}  (fleet built in {built:.0f} s; rules: {top})"
                )
                print(
                    f"    CPU: the cycle's processes {r['cpu']['cycle']:.1f} s (driver {r['cpu']['driver']:.1f} s,"
                    f" Spark's executors {r['cpu']['executors']:.1f} s), PostgreSQL {r['cpu']['postgres']:.1f} s"
                    f" (of {r['seconds']:.1f} s wall, {os.cpu_count()} cores)"
                )
                if r["cpu"]["cycle"]:
                    print(
                        f"    the driver's share of the cycle's CPU {100 * r['cpu']['driver'] / r['cpu']['cycle']:.1f} %;"
                        f" PostgreSQL {1e4 * r['cpu']['postgres'] / n:.1f} s of CPU per 10k streams"
                    )
                print(
                    f"    peak RSS since the bench started (run one engine per invocation to see each alone):"
                    f" the cycle's process {r['rss']['cycle']:,.0f} MB, largest finished child process (a cycle's worker, or a fleet builder) {r['rss']['largest child']:,.0f} MB"
                )
                if r["marks"]:
                    print(f"    seconds at each 10k streams applied: {r['marks']}")
                other = r["seconds"] - sum(v for k, v in r["phases"].items() if k not in _NESTED)
                if r["phases"]:  # timed in this process (the steps of worker processes are not seen)
                    print(
                        "    where the time went: "
                        + ", ".join(
                            f"{k} {v:.1f} s" + (" (in prepare_batch)" if k in _NESTED else "")
                            for k, v in sorted(r["phases"].items(), key=lambda kv: -kv[1])
                        )
                        + f", the rest (queries of apply, records, flags, outcomes) {other:.1f} s"
                    )
            _off_cluster()
    sizes = sorted({n for n, _ in results})
    for engine in args.engines.split(","):
        for a, b in zip(sizes, sizes[1:]):
            if (a, engine) in results and (b, engine) in results:
                print(
                    f"{engine}: N {a:,} -> {b:,} ({b // a}x streams): cycle time x{results[(b, engine)] / results[(a, engine)]:.1f}"
                )


if __name__ == "__main__":
    main()
