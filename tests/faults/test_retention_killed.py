"""kill -9 of a retention cycle (`manage.py run_retention_cycle`, the same `run_cycle` a Celery
worker runs) over many streams with subscribers, at the moment its truncations are recorded and
the store is being changed. Right after the kill the streams read whole; the next cycle, started
at once, finishes the job: every truncation completed, heads where the history says, no
subscriber's unconsumed data deleted except by the max limit (recorded as such)."""

import fcntl
import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import factories
import pytest
from django.core.management import call_command
from django.db import connection
from integration.conftest import ROOT, _database_url

from domain.events import EventIn
from faults.invariants import acknowledgement_cuts, check_log_whole, check_retention_safe
from groups.acknowledgement import publish_cut
from groups.models import Subscription
from retention.cycle.running import run_cycle
from retention.models import RetentionCycle, TruncationRecord
from store.redis_connection import get_redis
from streams import logs, services

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

STREAMS = 30
PER_SEGMENT = 300
T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def make_streams(count=STREAMS):
    """Streams of many small chunks; each with a subscriber that acknowledged part of it. The
    first one has a max limit its subscriber is behind (the max wins there); the second's
    subscriber acknowledged nothing (nothing may go)."""
    streams = []
    for n in range(count):
        policy = {"limit_type": "size", "min": 2000, "consumption_based": True}
        if n == 0:
            policy["max"] = 8000
        stream = factories.make_stream(f"r{n}", scope="faults", segment_count=2, policy=policy)
        log = logs.stream_log(stream)
        for seg in stream.segment_ids:
            key = next(k for k in (f"k{i}".encode() for i in range(1000)) if log.route(k) == seg)
            for _ in range(PER_SEGMENT // 50):
                factories.publish(stream, 50, b"e" * 100, routing_key=key)
        factories.make_group(stream, name=f"g{n}", scope="faults", retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT")
        streams.append(stream)
    return streams


def acknowledge(streams):
    for n, _stream in enumerate(streams):
        if n != 1:
            acked = {"0": 40 + n * 7, "1": 200 - n * 3} if n else {"0": 10, "1": 5}
            sub = Subscription.objects.get(reader_group__name=f"g{n}")
            publish_cut(sub, acked)


def test_kill_9_of_a_retention_cycle_is_finished_by_the_next_and_deletes_nothing_unconsumed(settings, tmp_path):
    settings.CBR_CHUNK_BYTES = 1024  # ~10 events a chunk: the cycle deletes thousands of files
    streams = make_streams()
    # locks of an earlier run's streams with the same ids (the test database reuses them)
    get_redis().delete(*[f"cbr:retention:{s.storage_key}" for s in streams])
    run_cycle(now=T0, trigger="command")  # records the tails in the retention sets
    for stream in streams:  # more on top: the cut recorded at T0 now keeps more than the min
        services.do_publish(stream, [EventIn(b"f" * 100, routing_key=f"k{i}".encode()) for i in range(100)])
    acknowledge(streams)
    cuts_before = acknowledgement_cuts()
    assert not TruncationRecord.objects.exists()
    later = T0 + timedelta(seconds=settings.CBR_RETENTION_INTERVAL + 1)

    # when a cycle is killed between recording its truncations and completing them: a writer
    # holding one segment's lock (as a publisher does) keeps it there, half-way through its
    # head moves; a second cycle is killed at a moment left to chance
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "cbrweb.settings",
        "DATABASE_URL": _database_url(connection.settings_dict),
        "REDIS_URL": settings.REDIS_URL,
        "CBR_DATA_DIR": str(settings.CBR_DATA_DIR),
        "CBR_VAR_DIR": str(tmp_path / "var"),
    }
    command = [sys.executable, "manage.py", "run_retention_cycle", "--now", later.isoformat(), "--engine", "local"]
    held = logs.stream_log(streams[STREAMS // 2]).segment("1").path / "lock"
    with open(held, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while not TruncationRecord.objects.filter(completed=False).exists():
            assert proc.poll() is None, (
                f"the cycle ended before it was killed: {proc.stdout.read()[-3000:]} {proc.stderr.read()[-2000:]}"
            )
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    unfinished = TruncationRecord.objects.filter(completed=False).count()
    assert unfinished == STREAMS - 1  # all but the stream whose subscriber acknowledged nothing
    moved = sum(1 for st in streams if any(logs.stream_log(st).head_cut().values()))
    for stream in streams:
        check_log_whole(stream)
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(random.uniform(1.0, 2.5))  # starting (~1 s), finishing the first, or done
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)

    # then right away every stream reads whole from its head, nothing before it
    for stream in streams:
        check_log_whole(stream)

    # and the next cycle finishes the job at once
    outcomes = run_cycle(now=later, trigger="command")
    skipped = [o.stream for o in outcomes if o.rule.startswith("skipped")]
    assert not skipped, f"left locked by the dead cycle: {skipped[:5]}"
    assert not TruncationRecord.objects.filter(completed=False).exists()
    for stream in streams:
        check_log_whole(stream)
        check_retention_safe(stream, cuts_before)
    heads = {str(s): logs.stream_log(s).head_cut() for s in streams}
    assert heads["faults/r1"] == {"0": 0, "1": 0}  # its subscriber acknowledged nothing
    assert heads["faults/r2"] == {"0": 54, "1": 194}  # exactly at its subscriber's cut
    capped = TruncationRecord.objects.filter(stream=streams[0]).first()
    assert "limit_max" in capped.rule and heads["faults/r0"]["0"] > 10  # past its subscriber: the max
    # no chunk wholly before a head is left behind
    for stream in streams:
        assert not any(logs.stream_log(stream).segment(s).has_chunks_before_head() for s in stream.segment_ids)
    print(
        f"retention cycle killed with {unfinished} truncations unfinished ({moved} streams' heads moved), "
        "a second cycle killed at random; the next cycle finished them"
    )


def test_a_cycle_killed_mid_way_is_marked_failed_by_the_next_cycle(settings, tmp_path):
    # given: a recorded cycle (the command records its cycles as beat's are) killed -9 while it
    # applies its truncations
    settings.CBR_CHUNK_BYTES = 1024
    streams = make_streams(3)
    run_cycle(now=T0, trigger="command")
    for stream in streams:
        services.do_publish(stream, [EventIn(b"f" * 100, routing_key=f"k{i}".encode()) for i in range(100)])
    acknowledge(streams)
    later = T0 + timedelta(seconds=settings.CBR_RETENTION_INTERVAL + 1)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "cbrweb.settings",
        "DATABASE_URL": _database_url(connection.settings_dict),
        "REDIS_URL": settings.REDIS_URL,
        "CBR_DATA_DIR": str(settings.CBR_DATA_DIR),
        "CBR_VAR_DIR": str(tmp_path / "var"),
    }
    command = ["manage.py", "run_retention_cycle", "--now", later.isoformat(), "--engine", "local"]
    held = logs.stream_log(streams[2]).segment("1").path / "lock"
    with open(held, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the cycle waits here, half-way through its head moves
        proc = subprocess.Popen(
            [sys.executable, *command], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 60
        while not TruncationRecord.objects.filter(completed=False).exists():
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    killed = RetentionCycle.objects.get()
    assert killed.state == "running" and killed.runner.split("|")[1] == str(proc.pid)

    # when: the next cycle runs
    with open(os.devnull, "w") as devnull:
        call_command(*command[1:], stdout=devnull)

    # then: the killed cycle is marked failed, saying why, and the next one finished its work
    killed.refresh_from_db()
    assert killed.state == "failed" and "process died" in killed.error and killed.finished_at is not None
    assert RetentionCycle.objects.exclude(pk=killed.pk).get().state == "done"
    assert not TruncationRecord.objects.filter(completed=False).exists()
