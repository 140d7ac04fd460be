"""Delayed delivery survives kill -9: a process publishing delayed events, sealing, merging,
loading and handing out (two reader groups reading and acking) is killed at random moments and
started again; in the end every delayed event reached each group, none early, and any second
delivery of an event is flagged (`delivery_count` above 1)."""

import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict

import pytest
from django.db import connection

from groups import consuming
from groups.models import ReaderGroup, ReadPosition
from groups.reader_groups import do_create_reader_group
from integration.conftest import ROOT, _database_url
from streams import logs, services
from streams.delaying import maintenance
from streams.models import DelayedOp

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

WORKLOAD = """
import os, random, sys, time
import django
django.setup()
from groups import consuming
from streams import services
from groups.consuming import floors
from streams.delaying import maintenance
from groups.models import ReaderGroup
from streams.models import Stream
from store.framing import EventIn

tick_path, log_path, seed, base = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
rng = random.Random(seed)
stream = Stream.objects.get(name="later")
groups = list(ReaderGroup.objects.filter(name__in=["one", "two"]).order_by("name"))
tick = int(open(tick_path).read() or 0) if os.path.exists(tick_path) else 0
# the readers' clock: 2 s per round, one time for the whole round (what a round hands out is
# logged at it), never behind the wall clock the index judges a publish's delivery times by (a
# round slower than 2 s, on a loaded machine, would otherwise see as not due what the index took
# for due, and hand it out "early" by the readers' own clock)
round_now = [base + tick * 2.0]
floors.clock = lambda: round_now[0]
log = open(log_path, "a")
while True:
    tick += 1
    with open(tick_path + ".new", "w") as f:
        f.write(str(tick))
    os.replace(tick_path + ".new", tick_path)
    round_now[0] = max(base + tick * 2.0, time.time())
    now = floors.clock()
    services.do_publish(stream, [EventIn(b"x", deliver_at_ms=int((now + rng.uniform(1, 60)) * 1000))
                                 for _ in range(rng.randrange(1, 12))])
    maintenance.maintain(stream, int(now * 1000))
    for group in groups:
        got = consuming.read(group, 100).deliveries
        for d in got:  # logged before the ack: a kill in between redelivers it (flagged)
            log.write(f"{group.name} {d['segment']} {d['offset']} {d['delivery_count']} {int(now * 1000)}\\n")
        log.flush()
        if got:
            consuming.ack(group, [d["delivery_id"] for d in got])
    print(tick, flush=True)
"""


def test_kill_9_during_add_seal_merge_and_load_loses_nothing_and_hands_out_nothing_early(
    settings, tmp_path, monkeypatch
):
    settings.CBR_DELAYED_PUBLISH_STALE_S = 1  # a publish killed before indexing is redone at once
    stream = services.do_create_stream(
        scope="it",
        name="later",
        segment_count=2,
        delayed_index={
            "min_index_count_per_bucket": 15,
            "max_time_step_per_segment_s": 10,
            "max_indexes_per_segment": 4,
            "max_num_buckets": 3,
        },
    )
    for name in ("one", "two"):
        do_create_reader_group(
            scope="it", name=name, streams=[stream], retention_type="NONE", ack_timeout_s=5, max_ack_pending=10_000
        )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "cbrweb.settings",
        "DATABASE_URL": _database_url(connection.settings_dict),
        "REDIS_URL": settings.REDIS_URL,
        "CBR_DATA_DIR": str(settings.CBR_DATA_DIR),
        "CBR_VAR_DIR": str(tmp_path / "var"),
        "CBR_DELAYED_LOCK_S": "1",
        "PYTHONPATH": str(ROOT),
    }
    tick_path, log_path, base = tmp_path / "tick", tmp_path / "handed", time.time()
    rng = random.Random(7)
    ticks = []
    for run in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", WORKLOAD, str(tick_path), str(log_path), str(run), str(base)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        first = proc.stdout.readline()  # running: it finished one round
        assert first, proc.stderr.read()[-3000:]
        time.sleep(rng.uniform(0.5, 2.5))
        proc.send_signal(signal.SIGKILL)  # wherever it is: adding, sealing, merging, loading, acking
        proc.wait(10)
        ticks.append(int(tick_path.read_text()))
    assert ticks[-1] > 30, ticks

    # started again one last time, here: finish the work and drain both groups
    time.sleep(1.1)  # a lock the last run held expires
    tick = int(tick_path.read_text())
    clock = {"now": max(base + tick * 2.0, time.time())}  # (as the workload's: never behind the wall clock)
    monkeypatch.setattr(consuming.floors, "clock", lambda: clock["now"])
    groups = list(ReaderGroup.objects.filter(name__in=["one", "two"]).order_by("name"))
    handed = [line.split() for line in log_path.read_text().splitlines() if line.strip()]
    for _ in range(80):
        clock["now"] += 2.0
        maintenance.maintain(stream, int(clock["now"] * 1000))
        for group in groups:
            got = consuming.read(group, 1000).deliveries
            handed += [
                [group.name, d["segment"], str(d["offset"]), str(d["delivery_count"]), str(int(clock["now"] * 1000))]
                for d in got
            ]
            if got:
                consuming.ack(group, [d["delivery_id"] for d in got])

    published = {}
    for seg in stream.segment_ids:
        for rec in logs.stream_log(stream).segment(seg).read(0, 100_000):
            published[(seg, rec.offset)] = rec.deliver_at_ms
    assert len(published) > 100
    firsts = defaultdict(int)
    for name, seg, offset, count, at in handed:
        key = (seg, int(offset))
        assert int(at) >= published[key], f"{key} handed out early"
        if count == "1":
            firsts[(name, key)] += 1
    for name in ("one", "two"):
        got = {key for (n, key) in firsts if n == name} | {(s, int(o)) for n, s, o, c, _ in handed if n == name}
        assert got == set(published), f"group {name} missed {sorted(set(published) - got)[:10]}"
    assert max(firsts.values()) == 1  # a second delivery is always flagged as one
    floors = {
        (p.subscription.reader_group.name, p.segment_id): p.floor
        for p in ReadPosition.objects.select_related("subscription__reader_group")
    }
    tails = logs.stream_log(stream).tail_cut()
    assert floors == {(g, s): tails[s] for g in ("one", "two") for s in stream.segment_ids}
    kinds = set(DelayedOp.objects.filter(stream=stream, state="succeed").values_list("type", flat=True))
    assert {"create", "load", "merge"} <= kinds, kinds
