"""The wake-up listener (streams/waking.py) against the run's real Redis: one waiting read per
group woken per announcement, a snapshot that catches what came while a read looked, due times
kept in a timer, and a read waiting in its thread (a WSGI server, the tests' client) woken by a
publish."""

import os
import threading
import time

import pytest
from django.db import connections
from factories import listening

from domain.events import EventIn
from groups import consuming, reader_groups
from streams import services, wait_stats, waking
from streams.waking import group_channel, notify, notify_due, publish_notice, stream_channel

pytestmark = pytest.mark.django_db


class Woken:
    def __init__(self):
        self.causes: list[str] = []
        self.event = threading.Event()

    def __call__(self, cause: str) -> None:
        self.causes.append(cause)
        self.event.set()


def test_one_waiting_read_per_group_is_woken_per_announcement(redis):
    lst = listening()
    s, g1, g2 = stream_channel("s-one"), group_channel("g-one"), group_channel("g-two")
    # given: two reads of group 1 and one of group 2 waiting on the stream
    reads = {name: Woken() for name in ("a", "b", "c")}
    waiters = {
        "a": lst.park((s, g1), g1, lst.snapshot((s, g1)), reads["a"]),
        "b": lst.park((s, g1), g1, lst.snapshot((s, g1)), reads["b"]),
        "c": lst.park((s, g2), g2, lst.snapshot((s, g2)), reads["c"]),
    }
    # when: one publish is announced
    publish_notice([s])
    assert reads["a"].event.wait(5) and reads["c"].event.wait(5)
    time.sleep(0.2)
    # then: the first read of each group woke, the second of group 1 waits on
    assert (reads["a"].causes, reads["b"].causes, reads["c"].causes) == (["stream"], [], ["stream"])
    # and a woken read that filled its batch wakes the group's next one
    lst.wake_more(g1, (s, g1))
    assert reads["b"].causes == ["more"]
    for w in waiters.values():
        lst.unpark(w)
    assert lst.count == 0


def test_one_announcement_wakes_the_first_read_of_each_of_many_groups_once(redis):
    lst = listening()
    s = stream_channel("s-many")
    groups = [group_channel(f"g-many-{i}") for i in range(300)]
    # given: two reads of each of 300 groups waiting on one stream
    first = [Woken() for _ in groups]
    second = [Woken() for _ in groups]
    waiters = [lst.park((s, g), g, lst.snapshot((s, g)), w) for g, w in zip(groups, first, strict=True)]
    waiters += [lst.park((s, g), g, lst.snapshot((s, g)), w) for g, w in zip(groups, second, strict=True)]
    waiting = lst.count
    time.sleep(2 * waking.FLUSH_S)  # what earlier tests counted is in Redis by now
    before = wait_stats.totals(redis)[1].get("woken:stream", 0.0)
    # when: one publish is announced
    publish_notice([s])
    assert all(w.event.wait(5) for w in first)
    time.sleep(0.2)
    # then: each group's first read woke once, its second waits on, and all are counted
    assert [w.causes for w in first] == [["stream"]] * 300
    assert [w.causes for w in second] == [[]] * 300
    assert lst.count == waiting - 300
    assert wait_until(lambda: wait_stats.totals(redis)[1].get("woken:stream", 0.0) - before == 300)
    for w in waiters:
        lst.unpark(w)
    assert lst.count == waiting - 600


def test_what_came_while_a_read_looked_wakes_it_at_once(redis):
    lst = listening()
    s, g = stream_channel("s-two"), group_channel("g-three")
    seen = lst.snapshot((s, g))
    publish_notice([s])  # while the read looks at the store
    deadline = time.monotonic() + 5
    while lst.snapshot((s, g)) == seen and time.monotonic() < deadline:
        time.sleep(0.01)
    woken = Woken()
    lst.park((s, g), g, seen, woken)
    assert woken.causes == ["missed"] and lst.count == 0


def test_a_due_time_wakes_a_waiting_read_then_and_not_before(redis):
    lst = listening()
    s, g = stream_channel("s-three"), group_channel("g-four")
    woken = Woken()
    waiter = lst.park((s, g), g, lst.snapshot((s, g)), woken)
    at = time.time()
    pipe = redis.pipeline()
    notify(pipe, [g], int((at + 0.6) * 1000))
    pipe.execute()
    assert not woken.event.wait(0.3)
    assert woken.event.wait(5) and woken.causes == ["timer"]
    assert time.time() >= at + 0.5
    lst.unpark(waiter)


def test_one_message_says_when_leases_of_many_groups_expire(redis):
    lst = listening()
    s = stream_channel("s-many")
    groups = [group_channel(f"g-many-{i}") for i in range(3)]
    woken = [Woken() for _ in groups]
    waiters = [lst.park((s, g), g, lst.snapshot((s, g)), w) for g, w in zip(groups, woken, strict=True)]
    at = time.time()
    pipe = redis.pipeline()
    notify_due(pipe, groups[:2], int((at + 0.6) * 1000))  # the third group's leases are not in it
    pipe.execute()
    assert not woken[0].event.wait(0.3)
    assert woken[0].event.wait(5) and woken[1].event.wait(5)
    assert (woken[0].causes, woken[1].causes) == (["timer"], ["timer"]) and time.time() >= at + 0.5
    assert not woken[2].event.wait(0.5)
    for waiter in waiters:
        lst.unpark(waiter)


@pytest.mark.django_db(transaction=True)  # the read runs in a thread of its own, on its own connection
def test_a_read_waiting_in_its_thread_is_woken_by_a_publish(api, clock):
    # given: a group with nothing to read, and a read of it waiting (the tests' client: a thread)
    listening()
    stream = services.do_create_stream(scope="w", name="s", segment_count=1)
    created = api.post(
        "/api/v1/reader-groups/",
        {"scope": "w", "name": "g", "streams": ["w/s"], "retention_type": "NONE"},
        format="json",
    )
    assert created.status_code == 201
    # when: an event is published while a read waits
    took, answer = answered_while_publishing(
        lambda: api.post("/api/v1/reader-groups/w/g/read/", {"max_events": 5, "wait_ms": 20_000}, format="json"),
        stream,
        b"hello",
    )
    # then: the read is answered with it, long before its wait ends
    assert [d["payload"] for d in answer["deliveries"]] == ["hello"]
    assert took < 10


def answered_while_publishing(request, stream, payload: bytes, publish=None) -> tuple[float, dict]:
    """`request()` sent from a thread of its own (it waits there); once it waits, `payload` is
    published on `stream` (by `publish(stream, events)` when given): how long the request took,
    and its answer."""
    answers = []

    def send():
        started = time.monotonic()
        try:
            response = request()
        finally:
            connections.close_all()  # this thread's own connection, left open by the request
        answers.append((time.monotonic() - started, response.json()))

    reader = threading.Thread(target=send)
    reader.start()
    time.sleep(0.5)
    (publish or services.do_publish)(stream, [EventIn(payload)])
    reader.join(20)
    ((took, answer),) = answers
    return took, answer


@pytest.mark.django_db(transaction=True)
def test_metrics_count_waiting_reads_what_woke_them_and_the_delivery_latency(api, client, redis):
    # given: what the process's figures say so far (earlier tests woke reads too)
    listening()
    stream = services.do_create_stream(scope="w", name="m", segment_count=1)
    api.post(
        "/api/v1/reader-groups/",
        {"scope": "w", "name": "g", "streams": ["w/m"], "retention_type": "NONE"},
        format="json",
    )
    time.sleep(2 * waking.FLUSH_S)  # what earlier tests counted is in Redis by now
    _, before = wait_stats.totals(redis)
    answers = []

    def send():
        try:
            answers.append(
                api.post("/api/v1/reader-groups/w/g/read/", {"max_events": 5, "wait_ms": 20_000}, format="json")
            )
        finally:
            connections.close_all()  # this thread's own connection, left open by the request

    reader = threading.Thread(target=send)
    reader.start()
    # when: a read waits (counted as waiting in /metrics), then a publish wakes it
    assert wait_until(lambda: "cbr_reads_waiting 1.0" in client.get("/metrics").content.decode())
    services.do_publish(stream, [EventIn(b"x")])
    reader.join(20)
    assert [d["payload"] for d in answers[0].json()["deliveries"]] == ["x"]

    # then: the figures count what woke it, its wait and the event's latency, and nothing waits
    def grew(field: str) -> float:
        return wait_stats.totals(redis)[1].get(field, 0.0) - before.get(field, 0.0)

    assert wait_until(lambda: grew("latency:count") == 1 and grew("wait:count") == 1 and grew("woken:stream") == 1)
    text = client.get("/metrics").content.decode()
    assert "cbr_reads_waiting 0.0" in text
    assert "# TYPE cbr_delivery_latency_seconds histogram" in text and 'cbr_read_wakeups_total{cause="stream"}' in text


def wait_until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.django_db(transaction=True)
def test_a_plain_read_waiting_in_its_thread_is_woken_by_a_publish(api):
    listening()
    stream = services.do_create_stream(scope="w", name="p", segment_count=1)
    took, answer = answered_while_publishing(
        lambda: api.get("/api/v1/streams/w/p/events/?wait_ms=20000"), stream, b"plain"
    )
    assert [e["payload"] for e in answer["events"]] == ["plain"] and took < 10


@pytest.mark.django_db(transaction=True)
def test_a_read_waiting_in_its_thread_reads_its_group_as_a_seek_left_it(api):
    # given: a group at the tail of six events, and a read of it waiting
    listening()
    stream = services.do_create_stream(scope="w", name="s", segment_count=1)
    services.do_publish(stream, [EventIn(f"e{i}".encode()) for i in range(6)])
    group = reader_groups.do_create_reader_group(
        scope="w", name="g", streams=[stream], start="tail", retention_type="NONE"
    )

    # when: the group is sought back to its head while the read waits, and an event comes
    def seek_and_publish(stream, events):
        reader_groups.do_seek(group, {"position": "head"})
        return services.do_publish(stream, events)

    took, answer = answered_while_publishing(
        lambda: api.post("/api/v1/reader-groups/w/g/read/", {"max_events": 10, "wait_ms": 20_000}, format="json"),
        stream,
        b"new",
        publish=seek_and_publish,
    )
    # then: the read is answered from the seek's target, not from where it began to wait (the
    # seek wakes it: it may answer the six events before the new one is published, or all seven)
    payloads = [d["payload"] for d in answer["deliveries"]]
    assert payloads[:6] == [f"e{i}" for i in range(6)] and payloads[6:] in ([], ["new"]), payloads
    assert took < 10


def test_a_forked_child_starts_a_listener_of_its_own(redis):
    parent = listening()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its listener is not the parent's copy, and subscribes by itself
        try:
            child = waking.listener()
            deadline = time.monotonic() + 10
            while not child.healthy and time.monotonic() < deadline:
                time.sleep(0.01)
            os.write(write, b"ok" if child is not parent and child.healthy else b"no")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 2)
    os.waitpid(pid, 0)
    assert answer == b"ok"


def test_a_group_handing_out_again_before_its_last_said_expiry_says_nothing_new(redis, clock):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail", ack_timeout_s=30)
    channel = group_channel(group.state_key)
    heard = redis.pubsub(ignore_subscribe_messages=True)
    heard.subscribe(waking.DUE_CHANNEL)

    def said() -> list[str]:
        out, deadline = [], time.monotonic() + 0.5
        while time.monotonic() < deadline:
            message = heard.get_message(timeout=0.05)
            if message is not None and channel in message["data"].decode():
                out.append(message["data"].decode().split(" ")[0])
        return out

    def hand_out(payload: bytes) -> None:  # (each acknowledged: no lease left to expire)
        services.do_publish(stream, [EventIn(payload)])
        got = consuming.read(group, 10).deliveries
        assert [d["payload"] for d in got] == [payload.decode()]
        consuming.ack(group, [d["delivery_id"] for d in got])

    hand_out(b"one")
    assert said() == [str(int((clock.now + 30) * 1000))]  # its leases expire then
    clock.now += 10
    hand_out(b"two")  # its lease expires later than what was said: the reads waiting wake first
    assert said() == []
    clock.now += 21  # the first expiry has passed: the next is said
    hand_out(b"three")
    assert said() == [str(int((clock.now + 30) * 1000))]
    heard.close()


def test_a_read_woken_at_the_expiry_said_last_waits_on_for_a_lease_handed_out_since(redis, clock):
    # given: consumer b's read waiting since before consumer a took two leases of 30 s, ten
    # seconds apart (only the first's expiry said), and a acknowledging the first
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail", ack_timeout_s=30)
    waiting = consuming.read(group, 10, 60_000, "b", park=True).wait.reading
    start = clock.now
    services.do_publish(stream, [EventIn(b"first")])
    first = consuming.read(group, 10, consumer="a").deliveries
    clock.now += 10
    services.do_publish(stream, [EventIn(b"second")])
    assert [d["payload"] for d in consuming.read(group, 10, consumer="a").deliveries] == ["second"]
    consuming.ack(group, [d["delivery_id"] for d in first])
    # when: b's read is woken at the first expiry (the time it heard), nothing has expired yet
    clock.now = start + 30
    [result] = consuming.read_woken([waiting], ["timer"])
    # then: it waits on until the second lease expires, and then has its event
    assert not result.parts and result.wait.timeout_s == pytest.approx(10, abs=0.5)
    clock.now = start + 41
    [result] = consuming.read_woken([result.wait.reading], ["timer"])
    assert [(d["payload"], d["delivery_count"]) for d in result.deliveries] == [("second", 2)]
