"""A woken read looks ahead: it knows where its group stopped on each segment (its last pass),
so its counts and its hand-out go in one call a segment, one round trip to Redis, its records read
ahead from there. Whenever the group's state is not what it expects (another consumer read, a
lease expired, a retry came due, few leases left), nothing is changed by the look and the read
goes on as one that counted first: it gets what it would have got alone. Against the run's real
Redis and database."""

import threading

import factories
import pytest
from django.db import connection

from domain.events import EventIn
from domain.ttl import TTL_HEADER
from groups import consuming, reader_groups
from groups.consuming import floors
from groups.models import ReadPosition
from store import redis_connection
from streams import services

pytestmark = pytest.mark.django_db


@pytest.fixture
def round_trips(monkeypatch):
    """How many pipelines the test's reads send to Redis (the real ones, counted). Only this
    thread's: a thread an earlier test left in the process (a live server's, a wake-up
    listener's) may send its own meanwhile."""
    sent = []
    execute = redis_connection.ScriptPipeline.execute
    mine = threading.get_ident()

    def counted(self, raise_on_error=True, meanwhile=None):
        if threading.get_ident() == mine:
            sent.append(len(self))
        return execute(self, raise_on_error, meanwhile)

    monkeypatch.setattr(redis_connection.ScriptPipeline, "execute", counted)
    return sent


def parked(group, max_events=10, consumer="c"):
    result = consuming.read(group, max_events, 30_000, consumer, park=True)
    assert result.wait is not None and not result.parts
    return result.wait.reading


def payloads(result):
    return [d["payload"] for d in result.deliveries]


def test_a_woken_read_counts_and_hands_out_in_one_round_trip(redis, round_trips):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail")
    services.do_publish(stream, [EventIn(b"zero")])
    first = consuming.read(group, 10)  # a group that has read before (Redis holds its state)
    consuming.ack(group, [d["delivery_id"] for d in first.deliveries])
    waiting = parked(group)
    services.do_publish(stream, [EventIn(b"one"), EventIn(b"two")])
    round_trips.clear()

    [result] = consuming.read_woken([waiting], ["stream"])

    assert payloads(result) == ["one", "two"]
    assert len(round_trips) == 1
    assert ReadPosition.objects.get(subscription__reader_group=group).handed == 3
    assert consuming.ack(group, [d["delivery_id"] for d in result.deliveries]).acked == 2
    # and it knows where it stopped for its next pass: woken again, one round trip again
    waiting = parked(group)
    services.do_publish(stream, [EventIn(b"three")])
    round_trips.clear()
    [result] = consuming.read_woken([waiting], ["stream"])
    assert payloads(result) == ["three"] and len(round_trips) == 1


def test_a_lease_that_expired_while_it_waited_comes_first(redis, clock):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail", ack_timeout_s=5)
    services.do_publish(stream, [EventIn(b"held")])
    held = consuming.read(group, 10, consumer="slow")
    assert payloads(held) == ["held"]
    waiting = parked(group, consumer="fast")
    clock.now += 6  # the slow consumer's lease expires
    services.do_publish(stream, [EventIn(b"new")])

    [result] = consuming.read_woken([waiting], ["stream"])

    assert payloads(result) == ["held", "new"]
    assert [d["delivery_count"] for d in result.deliveries] == [2, 1]


def test_a_retry_due_in_another_segment_is_handed_out_beside_the_new_events(redis, clock):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=2)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail")
    ids = stream.layout.active_ids
    keys = [factories.routing_key_for(stream, segment) for segment in ids]
    services.do_publish(stream, [EventIn(b"warm-up", routing_key=keys[1])])  # both segments read before
    services.do_publish(stream, [EventIn(b"first", routing_key=keys[0])])
    got = {d["payload"]: d["delivery_id"] for d in consuming.read(group, 10).deliveries}
    consuming.ack(group, [got["warm-up"]])
    consuming.nack(group, [got["first"]], delay_ms=2000)
    waiting = parked(group, max_events=10)
    clock.now += 3  # its retry is due
    services.do_publish(stream, [EventIn(b"second", routing_key=factories.routing_key_for(stream, ids[1]))])

    [result] = consuming.read_woken([waiting], ["stream"])

    assert sorted(payloads(result)) == ["first", "second"]
    ids = [d["delivery_id"] for d in result.deliveries]
    assert len(set(ids)) == 2 and consuming.ack(group, ids).acked == 2


def test_another_consumer_that_read_first_leaves_nothing_twice(redis):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail")
    waiting = parked(group, consumer="a")
    services.do_publish(stream, [EventIn(b"one")])
    other = consuming.read(group, 10, consumer="b")
    services.do_publish(stream, [EventIn(b"two")])

    [result] = consuming.read_woken([waiting], ["stream"])

    assert payloads(other) == ["one"] and payloads(result) == ["two"]


def test_a_group_near_its_max_ack_pending_counts_first_and_gets_no_more_than_its_room(redis):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail", max_ack_pending=4)
    services.do_publish(stream, [EventIn(b"a"), EventIn(b"b"), EventIn(b"c")])
    assert len(consuming.read(group, 3).deliveries) == 3  # three leases live, room for one
    waiting = parked(group, max_events=3)
    services.do_publish(stream, [EventIn(f"n{i}".encode()) for i in range(3)])

    [result] = consuming.read_woken([waiting], ["stream"])

    assert payloads(result) == ["n0"]


def test_delayed_events_not_due_are_passed_over_by_a_look_ahead(redis, clock):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail")
    waiting = parked(group)
    later = int((clock.now + 60) * 1000)
    services.do_publish(stream, [EventIn(b"later", deliver_at_ms=later), EventIn(b"now")])

    [result] = consuming.read_woken([waiting], ["stream"])

    assert payloads(result) == ["now"]
    consuming.ack(group, [d["delivery_id"] for d in result.deliveries])
    clock.now += 61
    assert payloads(consuming.read(group, 10)) == ["later"]


def test_an_at_most_once_group_woken_gets_each_event_once(redis, round_trips):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=2)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail", ack_policy="none")
    keys = [factories.routing_key_for(stream, segment) for segment in stream.layout.active_ids]
    services.do_publish(stream, [EventIn(b"warm-up", routing_key=key) for key in keys])
    assert len(consuming.read(group, 10).deliveries) == 2
    waiting = parked(group)
    services.do_publish(stream, [EventIn(f"e{i}".encode(), routing_key=keys[i % 2]) for i in range(4)])
    round_trips.clear()

    [result] = consuming.read_woken([waiting], ["stream"])

    assert sorted(payloads(result)) == ["e0", "e1", "e2", "e3"] and len(round_trips) == 1
    assert not consuming.read(group, 10).parts  # processed when handed out: nothing comes again


def test_a_read_looking_ahead_marks_its_group_seen_and_its_consumer_read(redis, clock, round_trips):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail")
    services.do_publish(stream, [EventIn(b"zero")])
    consuming.ack(group, [d["delivery_id"] for d in consuming.read(group, 10, consumer="w").deliveries])
    waiting = parked(group, consumer="w")
    clock.now += 100
    services.do_publish(stream, [EventIn(b"one")])
    round_trips.clear()

    [result] = consuming.read_woken([waiting], ["stream"])

    assert payloads(result) == ["one"] and len(round_trips) == 1
    assert consuming.last_seen(group).timestamp() == pytest.approx(clock.now, abs=0.01)
    heard = redis.hget(floors.consumers_key(group.state_key), "r:w")
    assert float(heard) == pytest.approx(clock.now, abs=0.01)


def test_a_woken_read_looking_ahead_passes_over_what_expired_in_the_same_call(redis, clock, round_trips):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail")
    services.do_publish(stream, [EventIn(b"zero")])
    consuming.ack(group, [d["delivery_id"] for d in consuming.read(group, 10).deliveries])
    waiting = parked(group)
    brief = {TTL_HEADER: "20000"}  # 20 s, as a publish's ttl_s keeps it
    services.do_publish(stream, [EventIn(b"one", headers=brief), EventIn(b"two"), EventIn(b"three", headers=brief)])
    clock.now += 60
    round_trips.clear()

    [result] = consuming.read_woken([waiting], ["stream"])

    assert payloads(result) == ["two"] and len(round_trips) == 1  # looked ahead: no round trip more
    consuming.ack(group, [d["delivery_id"] for d in result.deliveries])
    assert ReadPosition.objects.get(subscription__reader_group=group).floor == 4


@pytest.fixture
def calls(monkeypatch):
    """Each pipeline's script calls, by script: how many reads' looks went in one call."""
    sent = []
    run_script = redis_connection.ScriptPipeline.run_script
    mine = threading.get_ident()

    def counted(self, script, keys, args):
        if threading.get_ident() == mine:
            sent.append((script.sha, len(keys)))
        return run_script(self, script, keys, args)

    monkeypatch.setattr(redis_connection.ScriptPipeline, "run_script", counted)
    return sent


def warmed_group(stream, name, **settings):
    """A group that has read and acknowledged the stream's first event (Redis holds its state)."""
    group = reader_groups.do_create_reader_group(scope="t", name=name, streams=[stream], start="head", **settings)
    consuming.ack(group, [d["delivery_id"] for d in consuming.read(group, 10).deliveries])
    return group


def test_reads_of_many_groups_woken_together_look_in_a_few_calls_each_as_alone(redis, clock, round_trips, calls):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    services.do_publish(stream, [EventIn(b"zero")])
    groups = [warmed_group(stream, f"g{n}") for n in range(70)]  # more than one call's worth
    groups.append(warmed_group(stream, "once", ack_policy="none"))
    groups.append(warmed_group(stream, "short", ack_timeout_s=7))
    waiting = [parked(group) for group in groups]
    services.do_publish(stream, [EventIn(b"one"), EventIn(b"two")])
    round_trips.clear()
    calls.clear()

    results = consuming.read_woken(waiting, ["stream"] * len(waiting))

    assert [payloads(result) for result in results] == [["one", "two"]] * len(groups)
    assert len(round_trips) == 1
    looks = [n for _, n in calls if n > 12]  # the looks' calls: 12 keys and 13 per read
    assert sorted(looks) == [12 + 13 * 8, 12 + 13 * 64]  # 72 reads: 64 and 8
    # each group's own settings held in Redis: the at-most-once group has nothing in flight, the
    # others their leases, the short one's expiring first
    clock.now += 8
    assert consuming.read(groups[-2], 10).parts == []
    assert consuming.read(groups[0], 10).parts == []
    again = consuming.read(groups[-1], 10)
    assert payloads(again) == ["one", "two"] and [d["delivery_count"] for d in again.deliveries] == [2, 2]
    for group, result in zip(groups[:-1], results, strict=False):
        acked = consuming.ack(group, [d["delivery_id"] for d in result.deliveries]).acked
        assert acked == (0 if group.name == "once" else 2)
        assert ReadPosition.objects.get(subscription__reader_group=group).floor == 3


def test_competing_reads_of_one_group_woken_together_hand_each_event_out_once(redis):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    services.do_publish(stream, [EventIn(b"zero")])
    group = warmed_group(stream, "g")
    waiting = [parked(group, max_events=2, consumer=f"c{n}") for n in range(3)]
    services.do_publish(stream, [EventIn(f"e{n}".encode()) for n in range(4)])

    results = consuming.read_woken(waiting, ["stream"] * 3)

    got = [payloads(result) for result in results]
    assert sorted(p for ps in got for p in ps) == ["e0", "e1", "e2", "e3"]  # each once
    assert sorted(map(len, got)) == [0, 2, 2]
    assert [d["delivery_count"] for r in results for d in r.deliveries] == [1] * 4


@pytest.fixture
def statements_in_flight(monkeypatch):
    """Each UPDATE of the positions the test's thread sends, and whether a pipeline to Redis was
    in flight then (its commands sent, their replies not yet read)."""
    seen = []
    flying = []
    execute_pipeline = redis_connection.ScriptPipeline._execute_pipeline
    mine = threading.get_ident()

    def in_flight(self, connection_, commands, raise_on_error):
        flying.append(True)
        try:
            return execute_pipeline(self, connection_, commands, raise_on_error)
        finally:
            flying.pop()

    def watch(execute, sql, params, many, context):
        if threading.get_ident() == mine and sql.lstrip().upper().startswith("UPDATE") and "readposition" in sql:
            seen.append(bool(flying))
        return execute(sql, params, many, context)

    monkeypatch.setattr(redis_connection.ScriptPipeline, "_execute_pipeline", in_flight)
    with connection.execute_wrapper(watch):
        yield seen


def test_a_woken_read_persists_how_far_it_hands_out_while_redis_hands_out(redis, statements_in_flight):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail")
    services.do_publish(stream, [EventIn(b"zero")])
    consuming.ack(group, [d["delivery_id"] for d in consuming.read(group, 10).deliveries])
    waiting = parked(group, max_events=2)
    services.do_publish(stream, [EventIn(b"one"), EventIn(b"two"), EventIn(b"three")])
    statements_in_flight.clear()

    [result] = consuming.read_woken([waiting], ["stream"])

    assert payloads(result) == ["one", "two"]
    # one statement, sent while Redis ran the look; none after it: what it wrote is what was
    # handed out (its scan stops after the two it may hand out)
    assert statements_in_flight == [True]
    assert ReadPosition.objects.get(subscription__reader_group=group).handed == 3


def test_a_look_refused_leaves_handed_ahead_by_what_it_could_have_handed_out(redis, clock, statements_in_flight):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail", ack_timeout_s=5)
    services.do_publish(stream, [EventIn(b"held")])
    assert payloads(consuming.read(group, 10, consumer="slow")) == ["held"]
    waiting = parked(group, max_events=1, consumer="fast")
    clock.now += 6  # the slow consumer's lease expires: the look ahead is refused, the read counts
    services.do_publish(stream, [EventIn(b"new")])
    statements_in_flight.clear()

    [result] = consuming.read_woken([waiting], ["stream"])

    assert payloads(result) == ["held"]  # the expired lease first, and its one event only
    assert statements_in_flight == [True]  # how far the look could go; nothing after it moved further
    assert ReadPosition.objects.get(subscription__reader_group=group).handed == 2  # "new" included
    # the cost, if Redis loses the group's state now: "new" comes counted as delivered once before
    redis.flushdb()
    again = consuming.read(group, 10)
    assert [(d["payload"], d["delivery_count"]) for d in again.deliveries] == [("held", 3), ("new", 2)]


def test_an_at_most_once_group_moves_its_floor_only_after_the_hand_out(redis, statements_in_flight):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail", ack_policy="none")
    services.do_publish(stream, [EventIn(b"zero")])
    consuming.read(group, 10)
    waiting = parked(group)
    services.do_publish(stream, [EventIn(b"one")])
    statements_in_flight.clear()

    [result] = consuming.read_woken([waiting], ["stream"])

    assert payloads(result) == ["one"]
    assert statements_in_flight == [False]  # its floor is what the hand-out says: written after it
    assert ReadPosition.objects.get(subscription__reader_group=group).floor == 2


def test_a_group_that_delivers_once_persists_how_far_it_handed_out_only_after_the_hand_out(redis, statements_in_flight):
    # handed ahead of a hand-out would, after a loss of Redis state, poison an event never delivered
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail", max_deliveries=1)
    services.do_publish(stream, [EventIn(b"zero")])
    consuming.ack(group, [d["delivery_id"] for d in consuming.read(group, 10).deliveries])
    waiting = parked(group)
    services.do_publish(stream, [EventIn(b"one")])
    statements_in_flight.clear()

    [result] = consuming.read_woken([waiting], ["stream"])

    assert payloads(result) == ["one"] and statements_in_flight == [False]
    assert ReadPosition.objects.get(subscription__reader_group=group).handed == 2
