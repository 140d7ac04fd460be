"""Time to live (docs/consuming.md, "Time to live"): an event's own `ttl_s` and a stream's
`message_ttl_s`. Past it, an event not yet processed by a group is handed out to none of them and
counts as processed for each (floors pass it, `cbr_events_expired_total`), whether the group
reaches it for the first time, hands it out again after a lease or a nack, or would dead-letter
it; a delayed event's time counts from its delivery time. Over REST, against the real store,
Redis and database; the readers' clock is the test's."""

import re

import factories
import pytest

from domain.ttl import MAX_TTL_S
from groups.models import ReadPosition
from store.redis_connection import get_redis
from streams import wait_stats

pytestmark = pytest.mark.django_db
G = "/api/v1/reader-groups/"
S = "/api/v1/streams/"


def read(api, group="billing", **body):
    response = api.post(f"{G}shop/{group}/read/", {"max_events": 100, **body}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["deliveries"]


def ack(api, deliveries, group="billing"):
    ids = [d["delivery_id"] for d in deliveries]
    response = api.post(f"{G}shop/{group}/ack/", {"delivery_ids": ids}, format="json")
    assert response.status_code == 200, response.content


def expired_total(api) -> float:
    """`cbr_events_expired_total` as /metrics says it, after this process's counts are in Redis."""
    wait_stats.flush(get_redis(), None)
    found = re.search(r"^cbr_events_expired_total (\S+)$", api.get("/metrics").content.decode(), re.M)
    assert found is not None
    return float(found.group(1))


def floor(group="billing") -> int:
    return ReadPosition.objects.get(subscription__reader_group__name=group).floor


def test_an_event_past_its_own_ttl_goes_to_no_group_and_counts_as_processed(api, redis, clock):
    factories.create_stream_over_api(api)
    factories.create_group_over_api(api, start="head")
    factories.create_group_over_api(api, "audit", start="head", ack_policy="none")
    factories.publish_over_api(
        api, [{"payload": "keep"}, {"payload": "brief", "ttl_s": 20}, {"payload": "long", "ttl_s": 3600}]
    )
    before = expired_total(api)
    clock.now += 60  # (the readers' clock started before the publish: margins of tens of seconds)

    got = read(api)
    assert [d["payload"] for d in got] == ["keep", "long"]
    assert got[1]["headers"] == {"cbr-ttl-ms": "3600000"}  # its own ttl, as JetStream's Nats-TTL
    assert [d["payload"] for d in read(api, "audit")] == ["keep", "long"]
    ack(api, got)
    assert floor() == 3  # passed the expired one: nothing holds the group back
    assert floor("audit") == 3
    assert expired_total(api) == before + 2  # once per group


def test_a_stream_s_message_ttl_applies_to_events_without_their_own_and_can_change(api, redis, clock):
    factories.create_stream_over_api(api, message_ttl_s=60)
    assert api.get(f"{S}shop/orders/").json()["message_ttl_s"] == 60
    factories.create_group_over_api(api, start="head")
    factories.publish_over_api(api, [{"payload": "old"}, {"payload": "own", "ttl_s": 600}])
    clock.now += 120

    got = read(api)
    assert [d["payload"] for d in got] == ["own"]  # the event's own ttl wins
    ack(api, got)

    factories.publish_over_api(api, [{"payload": "new"}])
    changed = api.patch(f"{S}shop/orders/", {"message_ttl_s": None}, format="json")
    assert changed.status_code == 200 and changed.json()["message_ttl_s"] is None
    clock.now += 120
    assert [d["payload"] for d in read(api)] == ["new"]  # no limit any more


def test_a_delivery_held_past_its_ttl_is_not_handed_out_again(api, redis, clock):
    factories.create_stream_over_api(api)
    factories.create_group_over_api(api, start="head", ack_timeout_s=10)
    factories.publish_over_api(api, [{"payload": "slow", "ttl_s": 30}, {"payload": "other"}])
    first = read(api)
    assert [d["payload"] for d in first] == ["slow", "other"]
    nacked = api.post(f"{G}shop/billing/nack/", {"delivery_ids": [first[0]["delivery_id"]]}, format="json")
    assert nacked.status_code == 200, nacked.content
    ack(api, first[1:])
    clock.now += 60  # given back, then past its time to live before it is read again
    before = expired_total(api)

    assert read(api) == []
    assert floor() == 2
    assert expired_total(api) == before + 1


def test_a_lease_that_runs_out_past_the_ttl_does_not_deliver_it_again(api, redis, clock):
    factories.create_stream_over_api(api)
    factories.create_group_over_api(api, start="head", ack_timeout_s=10)
    factories.publish_over_api(api, [{"payload": "held", "ttl_s": 20}])
    assert [d["payload"] for d in read(api)] == ["held"]
    clock.now += 11
    assert [d["payload"] for d in read(api)] == ["held"]  # its lease ran out within its time to live
    clock.now += 30

    assert read(api) == []
    assert floor() == 1


def test_a_delayed_event_s_ttl_counts_from_its_delivery_time(api, redis, clock):
    factories.create_stream_over_api(api)
    factories.create_group_over_api(api, start="head")
    factories.create_group_over_api(api, "late", start="head")
    factories.publish_over_api(api, [{"payload": "later", "delay_ms": 60_000, "ttl_s": 30}])
    assert read(api) == [] and read(api, "late") == []
    clock.now += 75  # due (60 s after its publish), not yet 30 s past that

    assert [d["payload"] for d in read(api)] == ["later"]
    clock.now += 40  # past due + ttl
    assert read(api, "late") == []
    assert floor("late") == 1


def test_an_event_out_of_deliveries_past_its_ttl_is_not_dead_lettered(api, redis, clock):
    factories.create_stream_over_api(api)
    factories.create_group_over_api(api, start="head", max_deliveries=1, on_poison="dead_letter")
    factories.publish_over_api(api, [{"payload": "brief", "ttl_s": 10}, {"payload": "kept", "ttl_s": 3600}])
    got = read(api)
    assert len(got) == 2
    api.post(f"{G}shop/billing/nack/", {"delivery_ids": [d["delivery_id"] for d in got]}, format="json")
    clock.now += 40

    assert read(api) == []  # both out of deliveries: one dead-lettered, one expired
    letters = api.get(f"{S}shop/orders-dlq/events/").json()["events"]
    assert [e["payload"] for e in letters] == ["kept"]
    assert "cbr-ttl-ms" not in letters[0]["headers"]  # a dead letter lives as its own stream says
    assert floor() == 2


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"payload": "x", "ttl_s": 0}, "events[1].ttl_s"),
        ({"payload": "x", "ttl_s": 0.0005}, "events[1].ttl_s"),
        ({"payload": "x", "ttl_s": -1}, "events[1].ttl_s"),
        ({"payload": "x", "ttl_s": "5"}, "events[1].ttl_s"),
        ({"payload": "x", "ttl_s": True}, "events[1].ttl_s"),
        ({"payload": "x", "ttl_s": MAX_TTL_S + 1}, "events[1].ttl_s"),
        ({"payload": "x", "headers": {"cbr-ttl-ms": "5"}}, "events[1].headers.cbr-ttl-ms"),
    ],
)
def test_a_bad_ttl_is_refused_naming_the_field_and_nothing_is_written(api, redis, event, field):
    factories.create_stream_over_api(api)
    response = api.post(f"{S}shop/orders/events/", {"events": [{"payload": "fine"}, event]}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    assert api.get(f"{S}shop/orders/").json()["event_count"] == 0


@pytest.mark.parametrize("value", [0, -5, MAX_TTL_S + 1, "60", 1.5])
def test_a_bad_message_ttl_is_refused_naming_the_field(api, redis, value):
    response = api.post(S, {"scope": "shop", "name": "orders", "message_ttl_s": value}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "message_ttl_s"
    factories.create_stream_over_api(api)
    changed = api.patch(f"{S}shop/orders/", {"message_ttl_s": value}, format="json")
    assert changed.status_code == 400 and changed.json()["field"] == "message_ttl_s"
    assert api.get(f"{S}shop/orders/").json()["message_ttl_s"] is None
