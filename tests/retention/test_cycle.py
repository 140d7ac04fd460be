"""The retention cycle against the real store, database and Redis."""

import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from io import StringIO

import factories
import pytest
import redis
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from domain.policy_spec import parse_policy
from groups.models import Checkpoint, ReaderGroup, Subscription
from retention import services as retention_services
from retention import set_store
from retention.cycle import buckets, gathering, running
from retention.cycle.running import run_cycle
from retention.models import StoredRetentionSet, TruncationRecord
from retention.truncation import pending_truncations
from store import locks as redis_locks
from streams import logs
from streams.models import Segment

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


@pytest.fixture
def stream(db):
    return factories.make_stream(policy={"limit_type": "size", "min": 90, "max": 180, "consumption_based": True})


def publish(stream, n):
    factories.publish(stream, n, b"x" * 30)


def cycle(at):
    out = StringIO()
    call_command("run_retention_cycle", "--now", at.isoformat(), stdout=out)
    return out.getvalue().strip()


@pytest.mark.django_db
def test_the_worked_example_of_30_byte_events_through_the_command(stream):
    publish(stream, 7)
    factories.subscribe(stream, "A", {"0": 3})
    factories.subscribe(stream, "B", {"0": 4})
    assert cycle(T0) == "shop/orders: truncated at {'0': 3} (cbr:case-i:slb), reclaimed 90 bytes"
    publish(stream, 4)
    factories.subscribe(stream, "A", {"0": 9})
    factories.subscribe(stream, "B", {"0": 10})
    assert "truncated at {'0': 7} (cbr:case-ii:limit_min)" in cycle(T0 + timedelta(hours=1))
    publish(stream, 5)
    assert "truncated at {'0': 11} (cbr:case-iii:limit_max)" in cycle(T0 + timedelta(hours=2))
    assert logs.stream_log(stream).head_cut() == {"0": 11}
    record = TruncationRecord.objects.first()
    assert record.trigger == "command" and record.completed
    # a replayed cycle's truncations carry the cycle's clock, like its retention-set records
    assert sorted(TruncationRecord.objects.values_list("created_at", flat=True)) == [
        T0,
        T0 + timedelta(hours=1),
        T0 + timedelta(hours=2),
    ]
    assert {s["name"] for s in record.subscribers} == {"shop/A", "shop/B"}
    # the set keeps only what lies after the head
    assert [e.cut for e in set_store.entries(stream)] == [{"0": 16}]
    assert [e.recorded_at for e in set_store.entries(stream)] == [T0 + timedelta(hours=2)]


@pytest.mark.django_db
def test_a_none_group_behind_the_head_holds_nothing_back(stream):
    """A reader group with `retention_type: NONE` is no subscriber (PDP-47): its acknowledgement
    cut at the very start keeps nothing; the cycle truncates where the two subscribers are, and
    again once the head has passed the group."""
    publish(stream, 7)
    audit = factories.make_group(stream, name="audit", retention_type="NONE")
    behind = Subscription.objects.filter(reader_group=audit)
    assert behind.update(acknowledgement_cut={"0": 0}, acknowledgement_sizes={"0": 0}) == 1
    factories.subscribe(stream, "A", {"0": 3})
    factories.subscribe(stream, "B", {"0": 4})
    assert cycle(T0) == "shop/orders: truncated at {'0': 3} (cbr:case-i:slb), reclaimed 90 bytes"
    assert {s["name"] for s in TruncationRecord.objects.get().subscribers} == {"shop/A", "shop/B"}
    publish(stream, 4)
    factories.subscribe(stream, "A", {"0": 9})
    factories.subscribe(stream, "B", {"0": 10})
    assert "truncated at {'0': 7} (cbr:case-ii:limit_min)" in cycle(T0 + timedelta(hours=1))


@pytest.mark.django_db
def test_a_cycle_within_the_interval_adds_no_record_and_a_no_op_writes_no_history(stream):
    publish(stream, 2)
    assert cycle(T0) == ""
    assert cycle(T0 + timedelta(seconds=60)) == ""
    assert [e.recorded_at for e in set_store.entries(stream)] == [T0]
    assert StoredRetentionSet.objects.count() == 1
    assert not TruncationRecord.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_cycles_at_once_do_not_double_truncate(stream):
    publish(stream, 7)
    factories.subscribe(stream, "A", {"0": 3})
    results = []
    threads = [threading.Thread(target=lambda: results.append(run_cycle(now=T0))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert TruncationRecord.objects.count() == 1
    assert sorted(o.truncation is not None for r in results for o in r) == [False, True]


@pytest.mark.django_db
def test_a_truncation_a_crash_left_half_done_is_finished_by_the_next_cycle(stream):
    publish(stream, 7)
    log = logs.stream_log(stream)
    # recorded, but the process died before the store was touched
    TruncationRecord.objects.create(
        stream=stream,
        before_cut={"0": 0},
        after_cut={"0": 5},
        before_size=0,
        after_size=150,
        rule="cbr:case-i:slb",
        trigger="beat",
        completed=False,
    )
    assert log.head_cut() == {"0": 0}
    run_cycle(now=T0)
    assert log.head_cut() == {"0": 5}
    assert TruncationRecord.objects.get().completed


@pytest.mark.django_db
def test_bad_command_arguments_are_clear_errors(stream):
    with pytest.raises(CommandError, match="not an ISO 8601"):
        call_command("run_retention_cycle", "--now", "yesterday")
    with pytest.raises(CommandError, match="no stream"):
        call_command("run_retention_cycle", "--stream", "shop/nope")


@pytest.mark.django_db
def test_checkpoints_behind_the_new_head_expire_and_persisted_ones_once_wholly_behind(stream):
    publish(stream, 7)
    factories.subscribe(stream, "A", {"0": 3})
    group = ReaderGroup.objects.get(name="A")
    Checkpoint.objects.create(reader_group=group, name="old", cuts={"shop/orders": {"0": 1}})
    Checkpoint.objects.create(reader_group=group, name="gone", cuts={"shop/orders": {"0": 1}}, persist=True)
    Checkpoint.objects.create(reader_group=group, name="kept", cuts={"shop/orders": {"0": 3}}, persist=True)
    Checkpoint.objects.create(reader_group=group, name="at-head", cuts={"shop/orders": {"0": 3}})
    assert "truncated at {'0': 3}" in cycle(T0)
    # persisted ones go only once wholly before the head (PDP-47)
    assert sorted(Checkpoint.objects.values_list("name", flat=True)) == ["at-head", "kept"]


@pytest.mark.django_db(transaction=True)  # the Spark engine's executors see what is committed
@pytest.mark.parametrize("engine", ["local", pytest.param("spark", marks=pytest.mark.integration)])
def test_streams_go_in_batches_and_one_locked_elsewhere_is_skipped(monkeypatch, redis_url, request, engine):
    if engine == "spark":
        request.getfixturevalue("spark")  # the run's one shared session
    monkeypatch.setattr(gathering, "BATCH", 2)
    monkeypatch.setattr(buckets, "BUCKET", 3)  # two buckets: on Spark, two tasks
    policy = {"limit_type": "size", "min": 90, "max": 180, "consumption_based": True}
    streams = [factories.make_stream(f"s{i}", policy=policy) for i in range(5)]
    for s in streams:
        publish(s, 7)
        factories.subscribe(s, "A", {"0": 3})
    held = redis.Redis.from_url(redis_url)
    held.set(f"cbr:retention:{streams[2].storage_key}", "another-cycle", ex=60)
    try:
        outcomes = {o.stream: o for o in run_cycle(now=T0, engine=engine)}
    finally:
        held.delete(f"cbr:retention:{streams[2].storage_key}")
    assert len(outcomes) == 5
    assert outcomes["shop/s2"].rule == "skipped:locked-by-another-cycle"
    assert {name for name, o in outcomes.items() if o.truncation is not None} == {
        "shop/s0",
        "shop/s1",
        "shop/s3",
        "shop/s4",
    }
    for s in streams:
        expected = {"0": 0} if s.name == "s2" else {"0": 3}
        assert logs.stream_log(s).head_cut() == expected
        # the Segment rows follow the heads moved, sizes included
        row = Segment.objects.get(stream=s, segment_id="0")
        assert (row.head_offset, row.head_size) == (expected["0"], expected["0"] * 30)
    # the lock taken by the cycle is released, the other holder's lock was left alone
    assert all(held.get(f"cbr:retention:{s.storage_key}") is None for s in streams)


@pytest.mark.django_db
def test_a_lock_left_by_a_dead_cycle_on_this_machine_is_taken_over_and_a_live_ones_is_not(redis_url):
    policy = {"limit_type": "size", "min": 90, "max": 180, "consumption_based": True}
    streams = [factories.make_stream(f"d{i}", policy=policy) for i in range(3)]
    for s in streams:
        publish(s, 7)
        factories.subscribe(s, "A", {"0": 3})
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    here = redis_locks._this_machine()
    holders = {
        streams[0]: f"{here}|{dead.stdout.strip()}|x",  # a cycle killed -9 on this machine
        streams[1]: f"{here}|{os.getppid()}|x",  # alive
        streams[2]: f"another-host/boot/pid:[1]|{dead.stdout.strip()}|x",  # elsewhere: cannot tell
    }
    held = redis.Redis.from_url(redis_url)
    for s, token in holders.items():
        held.set(f"cbr:retention:{s.storage_key}", token, ex=60)
    try:
        outcomes = {o.stream: o for o in run_cycle(now=T0)}
    finally:
        held.delete(*[f"cbr:retention:{s.storage_key}" for s in streams])
    assert outcomes["shop/d0"].truncation is not None  # taken over
    assert outcomes["shop/d1"].rule == outcomes["shop/d2"].rule == "skipped:locked-by-another-cycle"


@pytest.mark.django_db
@pytest.mark.parametrize("where", ["prepare", "decide", "apply"])
def test_a_cycle_that_fails_releases_every_lock_it_took_and_none_it_did_not(redis_url, monkeypatch, where):
    """Review of a2722c0 (a batch's locks by one script call): a cycle that raises while preparing,
    deciding or applying a batch leaves none of its locks behind (the next cycle is not skipped),
    and a lock another live cycle holds is neither taken nor released."""

    policy = {"limit_type": "size", "min": 90, "max": 180, "consumption_based": True}
    streams = [factories.make_stream(f"f{i}", policy=policy) for i in range(4)]
    for s in streams:
        publish(s, 7)
        factories.subscribe(s, "A", {"0": 3})
    other = redis.Redis.from_url(redis_url)
    other_key = f"cbr:retention:{streams[3].storage_key}"
    other.set(other_key, f"{redis_locks._this_machine()}|{os.getppid()}|live", ex=60)

    def boom(*a, **kw):
        raise RuntimeError("boom")

    module, target = {
        "prepare": (gathering, "finish_truncations"),
        "decide": (buckets, "decide"),
        "apply": (buckets, "apply_batch"),
    }[where]
    if where == "prepare":
        TruncationRecord.objects.create(
            stream=streams[0],
            created_at=T0,
            before_cut={"0": 0},
            after_cut={"0": 1},
            before_size=0,
            after_size=30,
            rule="test",
            trigger="beat",
            completed=False,
        )
    monkeypatch.setattr(module, target, boom)
    try:
        with pytest.raises(RuntimeError):
            run_cycle(now=T0)
        assert [other.get(f"cbr:retention:{s.storage_key}") for s in streams[:3]] == [None] * 3
        assert other.get(other_key).endswith(b"|live")
    finally:
        other.delete(other_key)


@pytest.mark.django_db
def test_unfinished_truncations_are_found_per_stream_through_the_small_index(db):
    """`pending_truncations` finds exactly the asked streams' unfinished records; on PostgreSQL
    through the `truncation_pending` index even when the history is large and has no statistics
    (a plain `IN (…) AND NOT completed` read the whole history for every batch then)."""

    streams = [factories.make_stream(f"s{i}", scope="pend") for i in range(3)]

    def record(stream, completed):
        return TruncationRecord.objects.create(
            stream=stream,
            created_at=T0,
            before_cut={"0": 0},
            after_cut={"0": 1},
            before_size=0,
            after_size=30,
            rule="test",
            trigger="beat",
            completed=completed,
        )

    open_0, _, open_2 = record(streams[0], False), record(streams[1], True), record(streams[2], False)
    record(streams[0], True)
    assert [r.pk for r in pending_truncations([streams[0].pk, streams[1].pk])] == [open_0.pk]
    assert {r.pk for r in pending_truncations([s.pk for s in streams])} == {open_0.pk, open_2.pk}
    assert pending_truncations([]) == []
    if connection.vendor != "postgresql":
        return
    table = TruncationRecord._meta.db_table
    columns = [f.column for f in TruncationRecord._meta.concrete_fields if f.column != "id"]
    with connection.cursor() as cur:  # a long history, all complete, that ANALYZE never saw
        cur.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(columns)} FROM {table}, "
            f"generate_series(1, 200000) WHERE id = %s",
            [open_0.pk],
        )
        cur.execute(f"UPDATE {table} SET completed = true WHERE id > %s", [open_2.pk])
        cur.execute(f"SELECT count(*) FROM {table}")
        assert cur.fetchone()[0] > 200_000
    with CaptureQueriesContext(connection) as captured:
        found = pending_truncations([s.pk for s in streams])
    assert {r.pk for r in found} == {open_0.pk, open_2.pk}
    probe = next(q["sql"] for q in captured.captured_queries if "LATERAL" in q["sql"])
    with connection.cursor() as cur:
        cur.execute("EXPLAIN " + probe)
        plan = "\n".join(row[0] for row in cur.fetchall())
    assert "truncation_pending" in plan and f"Seq Scan on {table}" not in plan, plan


@pytest.mark.django_db
def test_a_fleet_cycle_reports_chunk_by_chunk_in_name_order_and_counts_what_it_did(monkeypatch):
    """The cycle lists ids (in the streams' order: scope, name), loads a chunk of streams at a
    time and hands the outcomes over a chunk at a time (nothing per stream is held for the whole
    fleet); the summary counts the same as the truncation history. A stream deleted after the
    listing is simply not there."""

    monkeypatch.setattr(buckets, "BUCKET", 2)
    policy = {"limit_type": "size", "min": 30, "max": 300, "consumption_based": False}
    created = [  # created f4 first: ids and names run in opposite orders
        retention_services.do_create_stream(
            scope="shop", name=f"f{4 - i}", segment_count=1, policy=parse_policy(policy)
        )
        for i in range(5)
    ]
    streams = created[::-1]  # f0 … f4
    for k, s in enumerate(streams):
        publish(s, 3 + k)
    run_cycle(now=T0)  # records the tails
    for s in streams:
        publish(s, 3)
    loads = []
    real_load = buckets.load_streams
    monkeypatch.setattr(buckets, "load_streams", lambda ids: loads.append(list(ids)) or real_load(ids))
    ids = [s.pk for s in streams]
    gone = streams[3]
    chunks, progress = [], []

    def report(outcomes):
        chunks.append([o.stream for o in outcomes])
        if len(chunks) == 1:  # deleted once the fleet was listed, before its chunk was loaded
            gone.delete()

    summary = running.run_cycle_summary(
        now=T0 + timedelta(hours=1), report=report, progress=lambda d, t: progress.append((d, t))
    )
    assert ids == sorted(ids, reverse=True)
    assert loads == [ids[0:2], ids[2:4], ids[4:5]]
    assert chunks == [["shop/f0", "shop/f1"], ["shop/f2"], ["shop/f4"]]
    done = [d for d, _ in progress]
    assert done == sorted(set(done)) and progress[-1] == (5, 5)  # moving on, never repeated
    records = TruncationRecord.objects.all()
    assert summary.streams == 4 and summary.truncations == len(records) == 4
    assert summary.bytes_reclaimed == records.reclaimed_bytes() > 0
    assert summary.rules == {"size:limit_min": 4}


def test_a_manual_truncation_and_a_cycles_leave_the_same_record_segment_rows_and_chunks(db, settings):
    """One truncation path (`retention.truncation`): a stream truncated by hand to the cut a
    cycle chose for its twin ends with the same history numbers, Segment rows and chunks."""
    settings.CBR_CHUNK_BYTES = 1024  # several chunks: the truncation deletes some
    policy = {"limit_type": "size", "min": 100, "max": 5000, "consumption_based": False}
    by_cycle = factories.make_stream("by-cycle", policy=policy, segment_count=2)
    by_hand = factories.make_stream("by-hand", segment_count=2)
    for at in (T0, T0 + timedelta(hours=2)):  # the first cycle records the tail, the second truncates
        for s in (by_cycle, by_hand):
            for _ in range(4):
                factories.publish(s, 10, b"x" * 100)
        run_cycle(now=at)
    (done,) = TruncationRecord.objects.filter(stream=by_cycle)
    retention_services.do_truncate(by_hand, done.after_cut, rule="manual", trigger="api")
    (manual,) = TruncationRecord.objects.filter(stream=by_hand)

    def numbers(r):
        fields = "before_cut after_cut before_size after_size tail_size chunks_deleted bytes_deleted completed"
        return [getattr(r, f) for f in fields.split()]

    assert done.chunks_deleted > 0 and numbers(manual) == numbers(done)
    rows = {
        s.name: list(
            Segment.objects.filter(stream=s)
            .order_by("segment_id")
            .values_list("segment_id", "head_offset", "head_size", "chunk_count", "physical_bytes")
        )
        for s in (by_cycle, by_hand)
    }
    assert rows["by-hand"] == rows["by-cycle"]
    assert [logs.stream_log(s).segment(g).chunk_bases() for s in (by_hand,) for g in ("0", "1")] == [
        logs.stream_log(by_cycle).segment(g).chunk_bases() for g in ("0", "1")
    ]
