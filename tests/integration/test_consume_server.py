"""Consuming through the real web server (gunicorn, two processes) with the Python client:
competing consumers, a consumer that dies holding leases, the web server killed mid-ack, Redis
flushed mid-run, and retention following an AUTOMATIC group's checkpoint."""

import os
import signal
import subprocess
import sys
import threading
import time

import factories
import pytest
import redis as redis_lib
from django.core.management import call_command

from cbr_client import CBRError, Client
from domain.events import EventIn
from groups.models import ReadPosition
from streams import logs, services

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def token(django_user_model):
    """An admin's API token."""
    return factories.token_for(factories.make_user("it", "admin"))


def fill(name: str, segments: int, per_segment: int):
    stream = factories.make_stream(name, scope="it", segment_count=segments)
    log = logs.stream_log(stream)
    for seg in stream.segment_ids:
        key = next(k for k in (f"k{i}".encode() for i in range(1000)) if log.route(k) == seg)
        services.do_publish(stream, [EventIn(f"{seg}:{i}".encode(), routing_key=key) for i in range(per_segment)])
    return stream


def persisted_floors(group: str) -> dict[str, int]:
    return dict(ReadPosition.objects.filter(subscription__reader_group__name=group).values_list("segment_id", "floor"))


def test_two_consumers_of_one_group_never_share_a_live_delivery(web_server, token):
    fill("shared", 4, 300)
    Client(web_server.url, token=token).create_reader_group("it", "pair", ["it/shared"], ack_timeout_s=120)
    seen: dict[str, list[tuple[str, int]]] = {"a": [], "b": []}
    errors = []
    ready = threading.Barrier(len(seen))

    def consume(name):
        try:
            with Client(web_server.url, token=token) as cbr:
                group = cbr.reader_group("it/pair")
                cbr.stream("it/shared")  # connected: both start reading together
                ready.wait(30)
                for message in group.consume(max_events=37, wait_ms=200, consumer=name, idle_stop=True):
                    with message:
                        seen[name].append((message.data["segment"], message.data["offset"]))
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=consume, args=(n,)) for n in seen]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    a, b = set(seen["a"]), set(seen["b"])
    assert len(a) == len(seen["a"]) and len(b) == len(seen["b"])  # nobody got one twice
    assert not a & b  # no event was live with both at once (leases outlive the run)
    assert a | b == {(str(s), o) for s in range(4) for o in range(300)}
    assert seen["a"] and seen["b"]  # both did work
    assert persisted_floors("pair") == {str(s): 300 for s in range(4)}


CONSUMER = """
import sys, time
from cbr_client import Client
group = Client(sys.argv[1], token=sys.argv[2]).reader_group("it/dies")
got = group.read(max_events=5)
print(",".join(f"{m.data['segment']}:{m.data['offset']}" for m in got), flush=True)
time.sleep(600)  # holds its leases until killed
"""


def test_a_consumer_killed_holding_leases_has_them_redelivered_after_the_timeout(web_server, token):
    fill("dying", 1, 20)
    cbr = Client(web_server.url, token=token)
    group = cbr.create_reader_group("it", "dies", ["it/dying"], ack_timeout_s=2)
    proc = subprocess.Popen(
        [sys.executable, "-c", CONSUMER, web_server.url, token],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.getcwd(),
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    held = proc.stdout.readline().strip().split(",")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert held == [f"0:{i}" for i in range(5)]
    assert [m.data["offset"] for m in group.read(max_events=5)] == [5, 6, 7, 8, 9]  # live leases: not yet
    time.sleep(2.2)
    again = group.read(max_events=5)
    assert [(m.data["offset"], m.delivery_count) for m in again] == [(i, 2) for i in range(5)]


PER_SEGMENT = 5000  # the kills come by progress (at a fifth, two fifths and three fifths of it), not by the clock


@pytest.mark.parametrize("acks", ["alone", "carried by the next read"])
def test_kill_9_of_the_web_server_mid_ack_loses_nothing(web_server, token, acks):
    fill("crashy", 2, PER_SEGMENT)
    Client(web_server.url, token=token).create_reader_group("it", "crash", ["it/crashy"], ack_timeout_s=3)
    processed: set[tuple[str, int]] = set()
    floors_seen: list[dict[str, int]] = []
    stop = threading.Event()
    carried: list = []  # the batch the next read acknowledges ("carried by the next read")

    def consume():
        nonlocal carried
        while not stop.is_set():
            try:
                with Client(web_server.url, token=token, timeout=5) as cbr:
                    group = cbr.reader_group("it/crash")
                    while not stop.is_set():
                        if acks == "alone":
                            batch = group.read(max_events=100, wait_ms=100)
                            processed.update((m.data["segment"], m.data["offset"]) for m in batch)  # work done
                            group.ack(batch)  # may be cut off by the kill: the events come again
                        else:  # the read's ack may be cut off by the kill, applied or not
                            batch = group.read(max_events=100, wait_ms=100, ack=carried)
                            processed.update((m.data["segment"], m.data["offset"]) for m in batch)
                            carried = batch
            except (OSError, CBRError):
                time.sleep(0.05)  # the server is down (or answering 5xx while it dies): retry

    thread = threading.Thread(target=consume)
    thread.start()
    kills = []
    for k in range(1, 4):  # kill -9 the whole server three times while it is acknowledging
        until = time.monotonic() + 60
        while len(processed) < k * 2 * PER_SEGMENT // 5 and time.monotonic() < until:
            time.sleep(0.01)  # whatever the speed of this machine, each kill comes mid-way
        floors_seen.append(persisted_floors("crash"))
        web_server.kill()
        kills.append(persisted_floors("crash"))
        floors_seen.append(kills[-1])
        web_server.start()
    assert sum(kills[-1].values()) < 2 * PER_SEGMENT  # the kills came while it was consuming
    deadline = time.monotonic() + 90
    while persisted_floors("crash") != {"0": PER_SEGMENT, "1": PER_SEGMENT} and time.monotonic() < deadline:
        floors_seen.append(persisted_floors("crash"))
        time.sleep(0.2)
    stop.set()
    thread.join(30)
    assert persisted_floors("crash") == {"0": PER_SEGMENT, "1": PER_SEGMENT}
    assert processed == {(s, o) for s in ("0", "1") for o in range(PER_SEGMENT)}  # every event processed
    for seg in ("0", "1"):  # and the persisted floor never moved back
        values = [f.get(seg, 0) for f in floors_seen]
        assert values == sorted(values)


def test_redis_flushed_mid_run_redelivers_from_the_persisted_floor_and_loses_nothing(web_server, token, settings):
    fill("flushed", 2, 500)
    cbr = Client(web_server.url, token=token)
    group = cbr.create_reader_group("it", "flush", ["it/flushed"])
    first = group.read(max_events=300)
    acked = [m for m in first if m.data["offset"] < 100]
    group.ack(acked)
    before = persisted_floors("flush")
    assert before == {"0": 100, "1": 100}
    redis_lib.Redis.from_url(settings.REDIS_URL).flushdb()  # everything above the floor is forgotten
    counts: dict[tuple[str, int], int] = {}
    for message in group.consume(max_events=200, wait_ms=0, idle_stop=True):
        with message:
            key = (message.data["segment"], message.data["offset"])
            counts[key] = counts.get(key, 0) + 1
    assert set(counts) == {(s, o) for s in ("0", "1") for o in range(100, 500)}  # nothing lost
    assert all(v == 1 for v in counts.values())
    assert persisted_floors("flush") == {"0": 500, "1": 500}


def test_retention_truncates_exactly_at_an_automatic_groups_checkpoint(web_server, token):
    fill("kept", 2, 100)
    cbr = Client(web_server.url, token=token)
    cbr.set_retention_policy("it/kept", limit_type="size", min=0, consumption_based=True)
    group = cbr.create_reader_group(
        "it", "auto", ["it/kept"], retention_type="AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT", checkpoint_interval_s=3600
    )
    batch = group.read(max_events=200)
    half = [m for m in batch if m.data["offset"] < 50 or (m.data["segment"] == "1" and m.data["offset"] < 70)]
    group.ack(half)
    cp = group.checkpoint("half", persist=True)
    assert cp["cuts"] == {"it/kept": {"0": 50, "1": 70}}
    call_command("run_retention_cycle", stream="it/kept")
    detail = cbr.stream("it/kept")
    assert detail["head_cut"] == {"0": 50, "1": 70}  # exactly the processed position, no further
    history = cbr.request("GET", "streams/it/kept/truncations/")["results"]
    assert history[0]["after_cut"] == {"0": 50, "1": 70}
    assert history[0]["subscribers"][0]["name"] == "it/auto"


def test_delayed_events_published_with_the_client_arrive_when_due_and_not_before(web_server, token):
    cbr = Client(web_server.url, token=token)
    cbr.create_stream("it", "reminders", segment_count=2)
    group = cbr.create_reader_group("it", "remind", ["it/reminders"], retention_type="NONE")
    sent = time.time()
    cbr.publish("it/reminders", ["now"])
    cbr.publish("it/reminders", [f"later-{i}" for i in range(6)], delay_ms=1500)
    first = group.read(max_events=100)
    assert [m.data["payload"] for m in first] == ["now"]
    group.ack(first)
    got = []
    while len(got) < 6 and time.time() - sent < 20:
        batch = group.read(max_events=100, wait_ms=500)
        got += [(time.time(), m.data) for m in batch]
        group.ack(batch)
    assert sorted(d["payload"] for _, d in got) == [f"later-{i}" for i in range(6)]
    assert all(at >= sent + 1.5 for at, _ in got)  # none before it was due
    assert all(d["deliver_at"] is not None and d["delivery_count"] == 1 for _, d in got)


def test_the_client_reads_a_streams_compaction_runs(web_server, token):
    """A stream's compaction runs come as a page, like every list (they were a bare JSON list,
    which the client once failed on; the soak met it)."""
    cbr = Client(web_server.url, token=token)
    cbr.create_stream("it", "table", cleanup_policy="compact")
    assert cbr.request("GET", "streams/it/table/compactions/")["results"] == []
    cbr.publish("it/table", [{"payload": "v1", "key": "k"}])
    queued = cbr.request("POST", "streams/it/table/compactions/")
    runs = cbr.request("GET", "streams/it/table/compactions/")
    assert [r["id"] for r in runs["results"]] == [queued["id"]] and runs["next"] is None
    with pytest.raises(CBRError) as refused:
        cbr.request("GET", "streams/it/nothing/compactions/")
    assert refused.value.status == 404
