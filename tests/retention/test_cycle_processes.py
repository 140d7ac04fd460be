"""The local engine on several processes (`retention.cycle.local.run_in_processes`): the same decisions,
heads, history and retention sets as one process, outcomes in the streams' order, and a cycle
whose worker process is killed mid-way finished by the next. PostgreSQL only (the only database a
cycle spreads over processes on: SQLite takes one writer at a time); CI runs these on it."""

import os
import signal
from datetime import UTC, datetime, timedelta

import factories
import pytest
import redis
from django.db import connection

from retention import set_store, truncation
from retention.cycle import gathering, local, spark
from retention.cycle.local import process_count
from retention.cycle.running import run_cycle
from retention.forked import WorkerDied
from retention.models import TruncationRecord
from streams import logs
from streams.models import Segment

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
POLICIES = [
    {"limit_type": "size", "min": 90, "max": 180, "consumption_based": True},
    {"limit_type": "size", "min": 30, "max": 600, "consumption_based": True},
    {"limit_type": "time", "min": 0, "max": 3600, "consumption_based": True},
    {"limit_type": "size", "min": 60, "max": 240, "consumption_based": False},
]

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="a cycle uses several processes on PostgreSQL only (CI runs these)"
)


@pytest.fixture
def parallel(settings, monkeypatch):
    """Chunks of 2 streams in batches of 1, from 1 stream up: a handful of streams exercise
    everything a 100k cycle does across processes."""
    settings.CBR_RETENTION_PARALLEL_MIN_STREAMS = 1
    monkeypatch.setattr(local, "PARALLEL_CHUNK", 2)
    monkeypatch.setattr(gathering, "BATCH", 1)


def fleet(scope: str, count: int = 9) -> list:
    """`count` streams with varied policies, 2 segments, 11 events each and two subscribers at
    varied cuts: a truncation by several different rules, and some streams left alone."""
    streams = []
    for i in range(count):
        stream = factories.make_stream(f"s{i}", scope=scope, segment_count=2, policy=POLICIES[i % len(POLICIES)])
        for k in range(11):
            factories.publish(stream, 1, b"x" * 30, routing_key=f"k{k}".encode())
        tail = logs.stream_log(stream).tail_cut()
        for g, share in (("A", (i % 3) / 3), ("B", ((i + 1) % 4) / 4)):
            factories.subscribe(stream, g, {s: int(o * share) for s, o in tail.items()})
        streams.append(stream)
    return streams


def state(streams) -> list:
    """What a cycle leaves of each stream, without its scope's name: head, Segment rows,
    retention set, history."""
    out = []
    for s in streams:
        out.append(
            (
                s.name,
                logs.stream_log(s).head_cut(),
                sorted(Segment.objects.filter(stream=s).values_list("segment_id", "head_offset", "head_size")),
                [(e.size_bytes, e.cut) for e in set_store.entries(s)],
                [
                    (
                        r.rule,
                        r.before_cut,
                        r.after_cut,
                        r.after_size,
                        r.completed,
                        [x["name"][-1] for x in r.subscribers],
                    )
                    for r in TruncationRecord.objects.filter(stream=s).order_by("id")
                ],
            )
        )
    return out


def outcome_rows(outcomes) -> list:
    return [(o.stream.split("/")[1], o.rule, o.truncation.after_cut if o.truncation else None) for o in outcomes]


@postgresql_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("engine", ["local", pytest.param("spark", marks=pytest.mark.integration)])
def test_a_cycle_over_two_processes_does_exactly_what_one_process_does(
    parallel, monkeypatch, redis_url, request, engine
):
    """The Spark engine: chunks of 5 streams (two Spark jobs, the second gathered while the
    first decides), each gathered and applied by the workers in parts of 2."""
    if engine == "spark":
        request.getfixturevalue("spark")  # the run's one shared session
        monkeypatch.setattr(spark, "SPARK_CHUNK", 5)
    one, two = fleet("one"), fleet("two")
    client = redis.Redis.from_url(redis_url)
    client.delete("test:cycle-pids")
    applying = local.apply_batch

    def apply_batch(*args, **kwargs):  # which processes applied batches
        client.sadd("test:cycle-pids", os.getpid())
        return applying(*args, **kwargs)

    monkeypatch.setattr(local, "apply_batch", apply_batch)
    monkeypatch.setattr(spark, "apply_batch", apply_batch)
    for hours in (0, 1, 2):  # three cycles: records added, dropped, subscribers moved on
        at = T0 + timedelta(hours=hours)
        alone = run_cycle(now=at, streams=one, trigger="command", workers=1, engine=engine)
        assert client.smembers("test:cycle-pids") == {str(os.getpid()).encode()}
        client.delete("test:cycle-pids")
        progress = []
        spread = run_cycle(
            now=at,
            streams=two,
            trigger="command",
            workers=2,
            engine=engine,
            progress=lambda done, total: progress.append((done, total)),
        )
        pids = {int(p) for p in client.smembers("test:cycle-pids")}
        client.delete("test:cycle-pids")
        assert len(pids) == 2 and os.getpid() not in pids  # two forked workers applied it
        assert progress[-1] == (9, 9) and [d for d, _ in progress] == sorted(d for d, _ in progress)
        assert len(progress) == (5 if engine == "local" else 2)  # per chunk done
        assert outcome_rows(spread) == outcome_rows(alone)  # in the streams' order
        assert state(two) == state(one)
    rules = {r for (r,) in TruncationRecord.objects.values_list("rule")}
    assert len(rules) >= 3 and TruncationRecord.objects.filter(completed=False).count() == 0
    # the worker processes released every lock they took
    assert not [k for k in client.scan_iter("cbr:retention:*")]


@postgresql_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("engine", ["local", pytest.param("spark", marks=pytest.mark.integration)])
def test_a_cycle_whose_worker_process_is_killed_is_finished_by_the_next(
    parallel, monkeypatch, redis_url, request, engine
):
    """kill -9 of a worker process after it recorded a truncation and before it touched the
    store: the cycle fails; the other worker releases what it holds (on Spark, parts gathered for
    later) as its tasks end; the next cycle takes over the dead worker's locks, finishes the
    half-done truncation and truncates the rest, each stream exactly once."""
    if engine == "spark":
        request.getfixturevalue("spark")
        monkeypatch.setattr(spark, "SPARK_CHUNK", 5)
    one, two = fleet("one"), fleet("two")
    expected_outcomes = outcome_rows(run_cycle(now=T0, streams=one, workers=1, engine=engine))
    client = redis.Redis.from_url(redis_url)
    client.delete("test:killed")
    truncating = truncation.truncate_many

    def truncate_many(targets, **kwargs):
        if os.getpid() != parent and client.set("test:killed", os.getpid(), nx=True):
            os.kill(os.getpid(), signal.SIGKILL)
        return truncating(targets, **kwargs)

    parent = os.getpid()
    monkeypatch.setattr(truncation, "truncate_many", truncate_many)
    with pytest.raises(WorkerDied, match="died during task"):
        run_cycle(now=T0, streams=two, workers=2, engine=engine)
    assert TruncationRecord.objects.filter(stream__in=two, completed=False).count() == 1
    left = [client.get(k) for k in client.scan_iter("cbr:retention:*")]
    killed = client.get("test:killed").decode()
    assert left  # the killed worker's locks outlived it, and only its: the others released theirs
    assert all(token.decode().split("|")[1] == killed for token in left)
    run_cycle(now=T0, streams=two, workers=2, engine=engine)
    assert state(two) == state(one)
    truncated = {name for name, _, cut in expected_outcomes if cut is not None}
    assert {r.stream.name for r in TruncationRecord.objects.filter(stream__in=two)} == truncated
    assert TruncationRecord.objects.filter(stream__in=two).count() == len(truncated)


@pytest.mark.django_db
def test_one_process_below_the_threshold_inside_a_transaction_or_off_postgresql(settings):
    settings.CBR_RETENTION_PARALLEL_MIN_STREAMS = 100
    assert process_count(99, 2) == 1
    assert process_count(1_000_000, 1) == 1
    # this test runs inside a transaction (other processes would not see its rows): one process
    assert connection.in_atomic_block and process_count(100_000, 2) == 1


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_as_many_processes_as_asked_and_chunks_allow_on_postgresql(settings):
    settings.CBR_RETENTION_PARALLEL_MIN_STREAMS = 100
    settings.CBR_RETENTION_WORKERS = 3
    assert process_count(100_000) == 3
    assert process_count(100_000, 2) == 2
    assert process_count(local.PARALLEL_CHUNK + 1, 8) == 2  # no process without a chunk
