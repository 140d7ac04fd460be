"""A reader group across scale events: a successor's events are handed out only once every one of
its predecessors has been handed out to its end, so each routing key's events go out in order,
through split → merge → split, with competing consumers, and while a waiting read sleeps."""

import threading
import time

import factories
import pytest
from django.db import connections

from domain.events import EventIn
from store.store import SealedSegments, StreamLog
from streams.logs import segment_store
from streams.models import Stream

pytestmark = pytest.mark.django_db

S = "/api/v1/streams/shop/orders/"
G = "/api/v1/reader-groups/shop/billing/"
KEYS = [f"user-{i}" for i in range(12)]


def scale(api, seal, new_ranges):
    answer = api.post(S + "scale/", {"seal": seal, "new_ranges": new_ranges}, format="json")
    assert answer.status_code == 200, answer.json()


def publish_round(api, n):
    factories.publish_over_api(api, [{"routing_key": k, "payload": f"{k}#{n}"} for k in KEYS])


def read(api, n, consumer="c1", **extra):
    answer = api.post(G + "read/", {"max_events": n, "consumer": consumer, **extra}, format="json")
    assert answer.status_code == 200, answer.content
    return answer.json()["deliveries"]


def ack(api, deliveries):
    if deliveries:
        answer = api.post(G + "ack/", {"delivery_ids": [d["delivery_id"] for d in deliveries]}, format="json")
        assert answer.status_code == 200, answer.content


def check_each_key_in_order(handed, rounds):
    payloads = [d["payload"] for d in handed]
    assert sorted(payloads) == sorted(f"{k}#{n}" for k in KEYS for n in range(rounds))  # each once
    for key in KEYS:
        assert [p for p in payloads if p.startswith(key + "#")] == [f"{key}#{n}" for n in range(rounds)]


@pytest.fixture
def scaled(api):
    """shop/orders born with one segment, a round of events per epoch: split, merge, split."""
    factories.make_stream(segment_count=1)
    factories.create_group_over_api(api, retention_type="AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT")
    publish_round(api, 0)
    scale(api, ["0"], [[0, 0.5], [0.5, 1]])
    publish_round(api, 1)
    scale(api, ["1", "2"], [[0, 1]])
    publish_round(api, 2)
    scale(api, ["3"], [[0, 0.3], [0.3, 0.6], [0.6, 1]])
    publish_round(api, 3)
    return Stream.objects.get(name="orders")


def test_competing_consumers_are_handed_each_keys_events_in_order_across_split_merge_split(api, scaled):
    handed = []
    for turn in range(40):
        got = read(api, 5, consumer=f"c{turn % 3}")
        ack(api, got)
        handed += got
    check_each_key_in_order(handed, 4)
    assert read(api, 5) == []


def test_a_successor_waits_for_what_a_stale_writer_appended_to_its_predecessor(api):
    """A writer that read the layout before the scale appends to the old segment after the epoch
    committed (the scale stopped before its seal): the group hands out the old segment to its end
    first. Once the new layout has appended to a successor, the old segment is sealed and the
    stale writer is refused (it is routed again), so no stale event lands behind a newer one."""
    stream = factories.make_stream(segment_count=1)
    factories.create_group_over_api(api, retention_type="AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT")
    stale = segment_store().stream(stream.storage_key, 1)
    real_seal = StreamLog.seal
    StreamLog.seal = lambda self, ids: {}  # the scale stops after its commit
    try:
        scale(api, ["0"], [[0, 0.5], [0.5, 1]])
    finally:
        StreamLog.seal = real_seal
    stale.append([EventIn(payload=f"old{i}".encode(), routing_key=b"a") for i in range(10)])
    factories.publish_over_api(api, [{"routing_key": "a", "payload": "new"}])
    with pytest.raises(SealedSegments):
        stale.append([EventIn(payload=b"too late", routing_key=b"a")])
    handed = [d for _ in range(12) for d in read(api, 1)]
    assert [d["payload"] for d in handed] == [f"old{i}" for i in range(10)] + ["new"]


@pytest.mark.django_db(transaction=True)  # the waiting read's thread sees what the test made
def test_a_waiting_read_gets_an_event_published_to_a_successor_made_while_it_waited(api):
    factories.listening()
    factories.make_stream(segment_count=1)
    factories.create_group_over_api(api, retention_type="AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT")
    factories.publish_over_api(api, [{"routing_key": "a", "payload": "first"}])
    assert [d["payload"] for d in read(api, 10)] == ["first"]
    answers = []

    def wait():
        started = time.monotonic()
        try:
            answers.append((read(api, 10, wait_ms=20_000), time.monotonic() - started))
        finally:
            connections.close_all()  # this thread's own connection

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.5)
    scale(api, ["0"], [[0, 0.5], [0.5, 1]])
    factories.publish_over_api(api, [{"routing_key": "a", "payload": "second"}])
    waiter.join(25)
    ((got, took),) = answers
    assert [d["payload"] for d in got] == ["second"] and took < 10


def test_a_group_starts_seeks_and_acknowledges_at_cuts_that_span_epochs(api):
    """A MANUAL group's cuts on a scaled stream are Pravega's: a cut in the sealed segment with
    the successors it waits for at 0, or one in the successors; a cut with a gap or with two
    started segments holding one key is refused, naming the field."""
    factories.make_stream(segment_count=1)
    factories.publish_over_api(api, [{"routing_key": f"k{i}", "payload": f"old{i}"} for i in range(6)])
    scale(api, ["0"], [[0, 0.5], [0.5, 1]])
    factories.publish_over_api(api, [{"routing_key": f"k{i}", "payload": f"new{i}"} for i in range(6)])
    factories.create_group_over_api(
        api,
        retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT",
        start={"stream_cuts": {"shop/orders": {"0": 4, "1": -1, "2": -1}}},
    )
    got = [d["payload"] for _ in range(4) for d in read(api, 20)]
    assert got[:2] == ["old4", "old5"] and sorted(got[2:]) == sorted(f"new{i}" for i in range(6))
    # the acknowledgement cut: refused with a gap, or with the old segment and a started successor
    cut_url = G + "truncation-cut/"
    gap = api.post(cut_url, {"stream": "shop/orders", "stream_cut": {"1": 0}}, format="json")
    assert gap.status_code == 400 and gap.json()["field"] == "stream_cut"
    tails = api.get(S).json()["tail_cut"]
    started = next(s for s, offset in tails.items() if offset > 0)
    overlap = {"0": 5, "1": 0, "2": 0, started: 1}
    both = api.post(cut_url, {"stream": "shop/orders", "stream_cut": overlap}, format="json")
    assert both.status_code == 400 and both.json()["field"] == "stream_cut"
    assert both.json()["code"] == "stream_cut_not_valid"
    # accepted in the successors, and shown so
    assert set(tails) == {"1", "2"}
    done = api.post(cut_url, {"stream": "shop/orders", "stream_cut": tails}, format="json")
    assert done.status_code == 200, done.json()
    detail = api.get(G).json()
    (sub,) = detail["streams"]
    assert sub["acknowledgement_cut"] == tails
    # a seek back into the sealed segment reads it again, then the successors
    seek = api.post(G + "seek/", {"stream_cuts": {"shop/orders": {"0": 5, "1": 0, "2": 0}}}, format="json")
    assert seek.status_code == 200, seek.json()
    again = [d["payload"] for _ in range(3) for d in read(api, 20)]
    assert again[0] == "old5" and sorted(again[1:]) == sorted(f"new{i}" for i in range(6))
