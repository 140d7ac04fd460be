"""Ordered reader groups (`delivery: "ordered"`): each segment read by one consumer at a time,
spread evenly over the consumers heard from, passed on only once its owner is silent and its
leases have expired; redeliveries before later events; successors only once their predecessors
are acknowledged. Against the real store, database and Redis, on the group's clock."""

import factories
import pytest

from groups.consuming import floors
from groups.models import ReaderGroup

pytestmark = pytest.mark.django_db

S = "/api/v1/streams/shop/orders/"
G = "/api/v1/reader-groups/shop/billing/"
KEYS = [f"user-{i}" for i in range(24)]


@pytest.fixture
def clock(monkeypatch):
    """The consuming layer's clock, moved by hand."""
    now = [1_800_000_000.0]
    monkeypatch.setattr(floors, "clock", lambda: now[0])
    return now


def create(api, **body):
    return factories.create_group_over_api(
        api, retention_type="NONE", delivery="ordered", consumer_timeout_s=30, ack_timeout_s=10, **body
    )


def publish_round(api, n):
    factories.publish_over_api(api, [{"routing_key": k, "payload": f"{k}#{n}"} for k in KEYS])


def hello(api, consumer):
    """A consumer heard from (a read that asks for one event and gives it straight back)."""
    got = read(api, consumer, 1)
    if got:
        api.post(G + "nack/", {"delivery_ids": [got[0]["delivery_id"]], "delay_ms": 0}, format="json")


def read(api, consumer, n=100):
    answer = api.post(G + "read/", {"max_events": n, "consumer": consumer}, format="json")
    assert answer.status_code == 200, answer.content
    return answer.json()["deliveries"]


def ack(api, deliveries):
    if deliveries:
        answer = api.post(G + "ack/", {"delivery_ids": [d["delivery_id"] for d in deliveries]}, format="json")
        assert answer.status_code == 200, answer.content


def test_each_segment_has_one_owner_and_they_are_spread_evenly(api, clock):
    factories.make_stream(segment_count=6)
    create(api)
    publish_round(api, 0)
    for c in ("a", "b", "c"):  # each heard from: the three share the six segments
        hello(api, c)
    got = {c: read(api, c) for c in ("a", "b", "c")}
    segments = {c: {d["segment"] for d in ds} for c, ds in got.items()}
    assert all(len(s) == 2 for s in segments.values()), segments
    assert set.union(*segments.values()) == {str(i) for i in range(6)}
    assignments = api.get(G).json()["assignments"]
    assert {c: sorted(v) for c, v in assignments.items()} == {
        c: sorted(f"shop/orders:{s}" for s in segs) for c, segs in segments.items()
    }


def test_a_silent_consumers_segments_pass_on_only_once_its_leases_expire(api, clock):
    factories.make_stream(segment_count=4)
    create(api)
    publish_round(api, 0)
    hello(api, "a")
    hello(api, "b")
    held = read(api, "a")  # a holds its two segments' events, unacknowledged, and goes silent
    mine = {d["segment"] for d in held}
    ack(api, read(api, "b"))
    clock[0] += 6  # a silent for 6 s: still live, its leases (10 s) in flight
    assert read(api, "b") == []  # nothing of a's segments for b
    clock[0] += 40  # now a is silent for 46 s and its leases expired long ago
    again = read(api, "b")
    assert {d["segment"] for d in again} == mine  # b takes them over, redeliveries first
    assert sorted(d["payload"] for d in again) == sorted(d["payload"] for d in held)
    assert all(d["delivery_count"] >= 2 for d in again)


def test_per_key_order_across_split_merge_split_with_three_consumers_one_of_which_stops(api, clock):
    factories.make_stream(segment_count=1)
    create(api)
    processed = []  # what each consumer acknowledged, in the order it processed it

    def work(consumer, n=7):
        got = read(api, consumer, n)
        ack(api, got)
        processed.extend(d["payload"] for d in got)
        return got

    publish_round(api, 0)
    for c in ("a", "b", "c"):
        work(c)
    api.post(S + "scale/", {"seal": ["0"], "new_ranges": [[0, 0.3], [0.3, 0.6], [0.6, 1]]}, format="json")
    publish_round(api, 1)
    api.post(S + "scale/", {"seal": ["1", "2"], "new_ranges": [[0, 0.6]]}, format="json")
    publish_round(api, 2)
    api.post(S + "scale/", {"seal": ["4"], "new_ranges": [[0, 0.2], [0.2, 0.6]]}, format="json")
    publish_round(api, 3)
    for turn in range(30):
        for c in ("a", "b", "c") if turn < 1 else ("a", "b"):
            work(c)
        if turn == 1:
            read(api, "c", 7)  # c takes a batch and stops without processing it
        clock[0] += 5
    assert sorted(processed) == sorted(f"{k}#{n}" for k in KEYS for n in range(4))
    for key in KEYS:
        assert [p for p in processed if p.startswith(key + "#")] == [f"{key}#{n}" for n in range(4)]
    assert "c" not in api.get(G).json()["assignments"]


def test_a_redelivery_comes_before_the_segments_later_events_even_with_a_backoff(api, clock):
    factories.make_stream(segment_count=1)
    create(api, backoff_s=[5])
    factories.publish_over_api(api, [{"routing_key": "k", "payload": f"e{i}"} for i in range(4)])
    first = read(api, "a", n=1)
    assert [d["payload"] for d in first] == ["e0"]
    nacked = api.post(G + "nack/", {"delivery_ids": [first[0]["delivery_id"]]}, format="json")
    assert nacked.status_code == 200
    assert read(api, "a", n=3) == []  # e1… wait for e0's redelivery (due in 5 s)
    clock[0] += 6
    assert [d["payload"] for d in read(api, "a", n=3)] == ["e0", "e1", "e2"]


def test_delivery_and_consumer_timeout_are_settings_with_refusals(api):
    factories.make_stream(segment_count=2)
    create(api)
    detail = api.get(G).json()
    assert detail["delivery"] == "ordered" and detail["consumer_timeout_s"] == 30
    for body, field in [({"delivery": "keyed"}, "delivery"), ({"consumer_timeout_s": 0}, "consumer_timeout_s")]:
        refused = api.patch(G, body, format="json")
        assert refused.status_code == 400 and refused.json()["field"] == field
    assert api.patch(G, {"delivery": "shared"}, format="json").json()["assignments"] == {}
    assert ReaderGroup.objects.get().delivery == "shared"


def test_the_group_page_shows_who_reads_which_segment(api, admin_client, clock):
    factories.make_stream(segment_count=2)
    create(api)
    publish_round(api, 0)
    read(api, "worker-1")
    html = admin_client.get("/reader-groups/shop/billing/").content.decode()
    assert "ordered" in html and "<code>worker-1</code> reads shop/orders:0, shop/orders:1" in html
