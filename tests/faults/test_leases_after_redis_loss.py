"""A consumer's deliveries after Redis lost the group's state (a dedicated redis-server killed -9
and started again empty), through the REST API: the deliveries handed out again carry new ids
and a delivery count above the one they had, the old holder's ack is refused (409 `lease_lost`)
and settles nothing of the new holder's, and `max_deliveries` counts on from what the database
knows instead of starting again at every loss."""

import pytest

from domain.events import EventIn
from faults.test_redis_restarted import RedisServer
from groups.models import ReadPosition
from streams import services

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

G = "/api/v1/reader-groups/shop/billing/"


@pytest.fixture
def own_redis(tmp_path, settings):
    """A redis-server of this test's own, which it kills and starts again empty."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    settings.REDIS_URL = server.url
    yield server
    if server.proc.poll() is None:
        server.proc.terminate()
        server.proc.wait(10)


def restart_empty(server):
    server.kill()
    server.start()


def post(api, path, body, statuses=(200,)):
    """POST, sent again once when the first request after a restart met the dead connection (a
    503 `redis_unavailable`, as documented)."""
    response = api.post(G + path, body, format="json")
    if response.status_code == 503:
        assert response.json()["code"] == "redis_unavailable", response.content
        response = api.post(G + path, body, format="json")
    assert response.status_code in statuses, response.content
    return response


def ids(deliveries):
    return [d["delivery_id"] for d in deliveries]


@pytest.fixture
def stream(own_redis):
    stream = services.do_create_stream(scope="shop", name="orders", segment_count=1)
    services.do_publish(stream, [EventIn(f"e{i}".encode()) for i in range(10)])
    return stream


def create(api, **body):
    body = {"scope": "shop", "name": "billing", "streams": ["shop/orders"], "retention_type": "NONE", **body}
    response = api.post("/api/v1/reader-groups/", body, format="json")
    assert response.status_code == 201, response.content


def test_a_stale_ack_after_redis_lost_its_state_is_refused_and_settles_nothing(api, stream, own_redis, clock):
    create(api)
    # given: ten events read, three acknowledged, then Redis killed and started empty
    first = post(api, "read/", {"max_events": 10}).json()["deliveries"]
    assert [d["offset"] for d in first] == list(range(10)) and {d["delivery_count"] for d in first} == {1}
    post(api, "ack/", {"delivery_ids": ids(first[:3])})
    restart_empty(own_redis)

    # when: the group reads again
    again = post(api, "read/", {"max_events": 10}).json()["deliveries"]

    # then: offsets 3-9 come again, with new ids and a count above the one they had
    assert [d["offset"] for d in again] == list(range(3, 10))
    assert {d["delivery_count"] for d in again} == {2}
    assert not set(ids(again)) & set(ids(first))
    # and the old holder's acks are refused as lease_lost, settling nothing
    stale = post(api, "ack/", {"delivery_ids": ids(first[3:5])}, statuses=(409,)).json()
    assert stale["code"] == "lease_lost" and stale["acked"] == 0
    assert {r["delivery_id"] for r in stale["refused"]} == set(ids(first[3:5]))
    # and the new holder's work is never lost: its acks count, its floor moves
    done = post(api, "ack/", {"delivery_ids": ids(again)}).json()
    assert done["acked"] == 7
    assert ReadPosition.objects.get().floor == 10


def test_an_ack_sent_while_the_state_is_lost_is_refused_as_lease_lost(api, stream, own_redis, clock):
    create(api)
    first = post(api, "read/", {"max_events": 4}).json()["deliveries"]
    restart_empty(own_redis)
    # nothing read since: Redis holds no state for the segment
    stale = post(api, "ack/", {"delivery_ids": ids(first)}, statuses=(409,)).json()
    assert stale["code"] == "lease_lost" and {r["reason"] for r in stale["refused"]} == {"lost"}
    never = first[0]["delivery_id"].rsplit("-", 2)[0] + "-9-1"  # offset 9 was never handed out
    unknown = post(api, "ack/", {"delivery_ids": [never]}, statuses=(400,)).json()
    assert unknown["code"] == "unknown_delivery"
    # and everything comes again, counting on
    again = post(api, "read/", {"max_events": 10}).json()["deliveries"]
    assert [(d["offset"], d["delivery_count"]) for d in again] == [(o, 2) for o in range(4)] + [
        (o, 1) for o in range(4, 10)
    ]


def test_max_deliveries_counts_on_across_losses_of_redis_state(api, stream, own_redis, clock):
    # given: a group that dead-letters after three deliveries, and an event given back twice
    create(api, max_deliveries=3, on_poison="dead_letter")
    counts = []
    for _ in range(2):
        got = post(api, "read/", {"max_events": 1}).json()["deliveries"]
        counts.append(got[0]["delivery_count"])
        post(api, "nack/", {"delivery_ids": ids(got)})
    # when: Redis loses the group's state before the third delivery
    restart_empty(own_redis)
    third = post(api, "read/", {"max_events": 1}).json()["deliveries"]
    counts.append(third[0]["delivery_count"])
    post(api, "nack/", {"delivery_ids": ids(third)})
    # and once more after that delivery
    restart_empty(own_redis)
    after = post(api, "read/", {"max_events": 1}).json()["deliveries"]

    # then: the counts went on (1, 2, 3), and the fourth hand-out did not happen: the event went to
    # the dead-letter stream instead of getting a fresh set of tries
    assert counts == [1, 2, 3] and third[0]["offset"] == 0
    assert [(d["offset"], d["delivery_count"]) for d in after] == [(1, 1)]
    dead = api.get("/api/v1/streams/shop/orders-dlq/events/").json()["events"]
    assert [e["payload"] for e in dead] == ["e0"]
