"""The two engines run one implementation (`retention.cycle.buckets.run_bucket`): the Spark
engine, each bucket a Spark task in an executor, does exactly what the local engine does in this
process (decisions, heads, history, retention sets, outcomes in the streams' order); a retried
bucket takes over its earlier attempt's locks and finishes its work; a stream is truncated once."""

from datetime import timedelta

import pytest
import redis
from cycle_fleets import T0, fleet, outcome_rows, state

from retention import truncation
from retention.cycle import buckets, gathering
from retention.cycle.buckets import bucket_tasks, run_bucket
from retention.cycle.gathering import load_streams, ship_ends
from retention.cycle.running import run_cycle
from retention.locks import _lock_key
from retention.models import TruncationRecord
from store import locks as redis_locks


@pytest.fixture
def small(monkeypatch):
    """Buckets of 2 streams in batches of 1: a handful of streams exercise what a fleet does."""
    monkeypatch.setattr(buckets, "BUCKET", 2)
    monkeypatch.setattr(gathering, "BATCH", 1)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)  # executors are other processes: they see what is committed
@pytest.mark.parametrize("shared_store", [True, False])
def test_the_spark_engine_does_exactly_what_the_local_engine_does(small, spark, redis_url, settings, shared_store):
    """Five buckets (one Spark job of five tasks) against the same fleet run in this process;
    without a shared store, the executors plan from shipped ends and this process applies."""
    settings.CBR_SPARK_SHARED_STORE = shared_store
    one, two = fleet("one", sized=True), fleet("two", sized=True)
    for hours in (0, 1, 2):  # three cycles: records added, dropped, subscribers moved on
        at = T0 + timedelta(hours=hours)
        alone = run_cycle(now=at, streams=one, trigger="command", engine="local")
        progress = []
        spread = run_cycle(
            now=at, streams=two, trigger="command", engine="spark", progress=lambda d, t: progress.append((d, t))
        )
        assert progress[-1] == (9, 9) and [d for d, _ in progress] == sorted(d for d, _ in progress)
        assert outcome_rows(spread) == outcome_rows(alone)  # in the streams' order
        assert state(two) == state(one)
    rules = {r for (r,) in TruncationRecord.objects.values_list("rule")}
    assert len(rules) >= 3 and TruncationRecord.objects.filter(completed=False).count() == 0
    # the executors released every lock they took
    assert not list(redis.Redis.from_url(redis_url).scan_iter("cbr:retention:*"))


@pytest.mark.django_db
def test_a_retried_bucket_takes_over_its_first_attempts_locks_and_another_cycles_stay(small, redis_url):
    """A bucket's first attempt died elsewhere holding its locks (a Spark executor lost: its
    locks name another host, so they would otherwise stay for LOCK_TIMEOUT_S); the retry,
    carrying the same task name, takes them over at once and finishes the bucket. A lock held for
    another task is left alone."""
    one, two = fleet("one", count=2), fleet("two", count=2)
    expected = outcome_rows(run_cycle(now=T0, streams=one))
    (bucket,) = bucket_tasks([s.pk for s in two[:1]], T0, "beat", None, outcomes=True)
    (other,) = bucket_tasks([s.pk for s in two[1:]], T0, "beat", None, outcomes=True)
    client = redis.Redis.from_url(redis_url)
    elsewhere = "otherhost/00/pid:[1]|4242|"
    client.set(_lock_key(two[0]), elsewhere + "aaaa@" + bucket["task"], ex=600)
    client.set(_lock_key(two[1]), elsewhere + "bbbb@" + bucket["task"] + "x", ex=600)  # another task
    _, outcomes = run_bucket(bucket)
    assert outcome_rows(outcomes) == expected[:1]
    assert client.get(_lock_key(two[0])) is None  # taken over, then released
    _, outcomes = run_bucket(other)
    assert [o.rule for o in outcomes] == ["skipped:locked-by-another-cycle"]
    assert client.getdel(_lock_key(two[1])).decode().endswith("x")
    assert redis_locks._task_of(redis_locks.holder_token(bucket["task"])) == bucket["task"]


@pytest.mark.django_db
def test_a_bucket_whose_attempt_died_after_recording_is_finished_once_by_its_retry(small, monkeypatch):
    """The first attempt recorded a truncation and died before the store was touched: the retry
    completes it, reports it as the bucket's, and truncates the rest; every stream is truncated
    once."""
    one, two = fleet("one", count=4), fleet("two", count=4)
    expected = outcome_rows(run_cycle(now=T0, streams=one))
    (bucket, *rest) = bucket_tasks([s.pk for s in two], T0, "beat", None, outcomes=True)
    real = truncation.truncate_many

    def dies(targets, **kwargs):
        raise SystemExit("the executor died")

    monkeypatch.setattr(truncation, "truncate_many", dies)
    with pytest.raises(SystemExit):
        run_bucket(bucket)
    monkeypatch.setattr(truncation, "truncate_many", real)
    recorded = TruncationRecord.objects.filter(stream__in=two, completed=False).count()
    assert recorded >= 1
    got = run_bucket({**bucket, "attempt": 1})[1]  # Spark's retry of the task
    for b in rest:
        got += run_bucket(b)[1]
    assert outcome_rows(got) == expected  # the retry reports what the bucket did in this cycle
    assert state(two) == state(one)
    truncated = {name for name, _, cut in expected if cut is not None}
    assert TruncationRecord.objects.filter(stream__in=two).count() == len(truncated)


@pytest.mark.parametrize(
    ("streams", "slots", "size"),
    [
        (20_000, None, 2_000),  # in process: the largest buckets
        (20_000, 2, 2_000),  # 10 buckets: 5 a core
        (20_000, 16, 500),  # 40 buckets, not 10: every core gets work
        (100_000, 16, 1_563),  # 64 buckets: 4 a core
        (1_000, 2, 500),  # never under a batch
        (3, 2, 500),
    ],
)
def test_buckets_are_small_enough_for_every_executor_core_but_never_under_a_batch(streams, slots, size):
    assert buckets.bucket_size(streams, slots) == size
    tasks = bucket_tasks(list(range(streams)), T0, "beat", None, outcomes=False, slots=slots)
    assert [i for b in tasks for i in b["ids"]] == list(range(streams))  # every stream once, in order
    assert max(len(b["ids"]) for b in tasks) == min(size, streams)
    assert len({b["task"] for b in tasks}) == len(tasks)


def _planned_cycle(streams, at, data_dir, settings):
    """A cycle as the Spark engine runs it without a shared store, its buckets in this process:
    the ends read here, each bucket planned with `CBR_DATA_DIR` pointing at an empty directory
    (what an executor on another host has), then applied here."""
    out = []
    plans = []
    for bucket in bucket_tasks([s.pk for s in streams], at, "command", None, outcomes=True):
        shipped = {**bucket, "ends": ship_ends(load_streams(bucket["ids"]))}
        real = settings.CBR_DATA_DIR
        settings.CBR_DATA_DIR = data_dir
        try:
            plan = buckets.plan_bucket(shipped)
        finally:
            settings.CBR_DATA_DIR = real
        plans.append(plan)
        out += buckets.apply_plan(shipped, plan)[1]
    return out, plans


@pytest.mark.django_db
def test_a_bucket_planned_without_the_store_ends_as_the_local_engine_ends_it(small, settings, tmp_path):
    """Planned from shipped ends (the store not opened: the executor's data directory stays
    empty) and applied by the driver: the same decisions, heads, Segment rows, retention sets and
    history as the local engine, over three cycles. Streams whose subscribers' sizes are recorded
    are planned; the others need the store and are run by the driver."""
    one, two = fleet("one", sized=True), fleet("two", sized=True)
    elsewhere = tmp_path / "executor-data"
    elsewhere.mkdir()
    planned = deferred = 0
    for hours in (0, 1, 2):
        at = T0 + timedelta(hours=hours)
        alone = run_cycle(now=at, streams=one, trigger="command", engine="local")
        got, plans = _planned_cycle(two, at, elsewhere, settings)
        assert outcome_rows(got) == outcome_rows(alone)
        assert state(two) == state(one)
        planned += sum(len(p["records"]) for p in plans)
        assert not any(p["unfinished"] for p in plans)
        deferred += sum(len(p["deferred"]) for p in plans)
    assert planned >= 2 and deferred >= 2  # both halves were exercised
    assert list(elsewhere.iterdir()) == []  # the store was never opened there
    assert TruncationRecord.objects.filter(completed=False).count() == 0


@pytest.mark.django_db
def test_a_planned_bucket_locks_its_truncated_streams_until_the_driver_applied_them(small, settings, redis_url):
    """Between the executor's plan and the driver's apply, the planned streams stay locked (no
    other cycle or manual truncation works on them); the others are free; the driver frees all."""
    two = fleet("two", sized=True)
    client = redis.Redis.from_url(redis_url)
    seen = set()
    for bucket in bucket_tasks([s.pk for s in two], T0, "command", None, outcomes=True):
        shipped = {**bucket, "ends": ship_ends(load_streams(bucket["ids"]))}
        plan = buckets.plan_bucket(shipped)
        recorded = set(TruncationRecord.objects.filter(pk__in=plan["records"]).values_list("stream_id", flat=True))
        assert TruncationRecord.objects.filter(pk__in=plan["records"], completed=True).count() == 0
        for stream in (s for s in two if s.pk in bucket["ids"]):
            assert (client.get(_lock_key(stream)) is not None) == (stream.pk in recorded)
        buckets.apply_plan(shipped, plan)
        seen |= recorded
    assert len(seen) >= 2
    assert not list(client.scan_iter("cbr:retention:*"))
    assert TruncationRecord.objects.filter(pk__in=plan["records"], completed=False).count() == 0


@pytest.mark.django_db
def test_a_planned_bucket_whose_attempt_died_after_recording_hands_its_records_to_the_retry(small, settings):
    """The first attempt recorded and died before the driver had its plan: the retry takes over
    its locks, does not decide those streams again, and hands their records on; each stream is
    truncated once, as the local engine does."""
    one, two = fleet("one", count=4, sized=True), fleet("two", count=4, sized=True)
    expected = outcome_rows(run_cycle(now=T0, streams=one))
    got = []
    for bucket in bucket_tasks([s.pk for s in two], T0, "beat", None, outcomes=True):
        shipped = {**bucket, "ends": ship_ends(load_streams(bucket["ids"]))}
        first = buckets.plan_bucket(shipped)  # its answer is lost with its executor
        retry = buckets.plan_bucket({**shipped, "attempt": 1})
        assert sorted(retry["unfinished"]) == sorted(first["records"]) and not retry["records"]
        got += buckets.apply_plan(shipped, retry)[1]
    assert outcome_rows(got) == expected
    assert state(two) == state(one)
