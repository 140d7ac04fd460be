"""A read that finds nothing waits no longer than until the earliest delayed event of its streams
comes due. The pass finds that time on the round trip it sends anyway (`DelayIndex.earliest_on`),
not on one of its own; while a bucket of the index is being sealed (its earliest is on keys the
first answer names), the read asks the index itself. Against the run's real Redis and database."""

import time

import pytest

from domain.events import EventIn
from groups import consuming, reader_groups
from groups.consuming import reading
from streams import services
from streams.delaying.stream_index import index_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def asked_itself(monkeypatch):
    """Each time a read asked the index for its earliest time on a round trip of its own."""
    asked = []
    own = reading._next_delayed

    def counted(group_slots):
        asked.append(len(group_slots))
        return own(group_slots)

    monkeypatch.setattr(reading, "_next_delayed", counted)
    return asked


def parked(group, wait_ms=60_000):
    result = consuming.read(group, 10, wait_ms, "c", park=True)
    assert result.wait is not None and not result.parts
    return result.wait


def test_a_read_waits_until_the_earliest_delayed_event_found_on_its_own_round_trip(redis, asked_itself):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail")
    due_ms = int(time.time() * 1000) + 20_000
    services.do_publish(
        stream, [EventIn(b"later", deliver_at_ms=due_ms), EventIn(b"much later", deliver_at_ms=due_ms + 9_000)]
    )

    wait = parked(group)

    assert wait.timeout_s == pytest.approx(20, abs=1)  # until the first comes due, not the 60 s asked
    assert asked_itself == []
    # and so does the read when woken, parking again
    [again] = consuming.read_woken([wait.reading], ["stream"])
    assert again.wait.timeout_s == pytest.approx(20, abs=1) and asked_itself == []


def test_a_read_of_a_stream_without_delayed_events_waits_its_whole_wait(redis, asked_itself):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail")
    assert parked(group, wait_ms=30_000).timeout_s == pytest.approx(30, abs=1)
    assert asked_itself == []


def test_while_a_bucket_is_being_sealed_the_read_asks_the_index_itself(redis, asked_itself):
    stream = services.do_create_stream(scope="t", name="orders", segment_count=1)
    group = reader_groups.do_create_reader_group(scope="t", name="g", streams=[stream], start="tail")
    due_ms = int(time.time() * 1000) + 20_000
    services.do_publish(stream, [EventIn(b"later", deliver_at_ms=due_ms)])
    state = index_of(stream).keys[0]
    redis.hset(state, "sealing", "7")  # a generation being sealed (its earliest on its own key)

    wait = parked(group)

    assert asked_itself == [1]
    assert wait.timeout_s == pytest.approx(20, abs=1)
