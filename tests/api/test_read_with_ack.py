"""A read that acknowledges the previous batch on its way (`ack` in the read's body): one request
where a consumer would send two. Same rules as an ack request, against the real store and Redis."""

import factories
import pytest
import redis
from django.db import connection
from django.test.utils import CaptureQueriesContext

from domain.events import EventIn
from groups.models import Checkpoint, ReadPosition
from streams import services

pytestmark = pytest.mark.django_db

URL = "/api/v1/reader-groups/"
G = URL + "shop/billing/"


@pytest.fixture
def stream():
    """Ten events on each of two segments."""
    stream = factories.make_stream(segment_count=2)
    for seg in "01":
        key = factories.routing_key_for(stream, seg)
        services.do_publish(stream, [EventIn(f"{seg}:{i}".encode(), routing_key=key) for i in range(10)])
    return stream


def create(api, **body):
    return factories.create_group_over_api(api, **{"retention_type": "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT", **body})


def post_read(api, **body):
    return api.post(G + "read/", body, format="json")


def ids(deliveries):
    return [d["delivery_id"] for d in deliveries]


def floors():
    return {p.segment_id: p.floor for p in ReadPosition.objects.filter(subscription__reader_group__name="billing")}


def test_a_read_without_ack_answers_exactly_as_before(api, stream, clock):
    create(api)
    body = post_read(api, max_events=2).json()
    assert list(body) == ["deliveries", "missed", "missed_by_stream", "pending_limit_reached"]


def test_the_ack_is_applied_before_the_read_and_the_floor_persisted(api, stream, clock):
    create(api, max_ack_pending=4)
    first = post_read(api, max_events=4).json()["deliveries"]
    assert post_read(api, max_events=4).json()["pending_limit_reached"]  # four live leases: no room
    answer = post_read(api, max_events=4, ack={"delivery_ids": ids(first)})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["ack"] == {"acked": 4, "waiting_for_sinks": 0, "given_back": 0, "refused": []}
    # the ack freed the room first, so this read hands out the next four
    second = body["deliveries"]
    assert len(second) == 4 and not set(ids(first)) & set(ids(second)), body
    assert floors() == {"0": 2, "1": 2}
    # the last batch acknowledged with an ordinary ack: everything handed out is processed once
    rest = post_read(api, max_events=20, ack={"delivery_ids": ids(second)}).json()
    assert rest["ack"]["acked"] == 4 and len(rest["deliveries"]) == 4
    assert api.post(G + "ack/", {"delivery_ids": ids(rest["deliveries"])}, format="json").json()["acked"] == 4
    assert floors() == {"0": 6, "1": 6}


def test_the_carried_ack_and_the_read_persist_their_floors_in_one_statement(api, stream, clock):
    # given a batch handed out
    create(api)
    first = post_read(api, max_events=4).json()["deliveries"]

    # when the next read carries its ack
    with CaptureQueriesContext(connection) as queries:
        body = post_read(api, max_events=4, ack={"delivery_ids": ids(first)}).json()

    # then the floors the ack moved are persisted with the read's, by one UPDATE
    updates = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE") and "floor" in q["sql"]]
    assert len(updates) == 1 and body["ack"]["acked"] == 4
    assert floors() == {"0": 2, "1": 2}


@pytest.mark.parametrize("retention_type", ["NONE", "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT"])
def test_a_steady_read_carrying_an_ack_asks_the_database_one_query_and_one_update(api, stream, clock, retention_type):
    # given a group that has read a batch and acknowledged it (its positions exist), with sinks,
    # a backoff and an end cut to look at, its checkpoint not due
    create(
        api,
        retention_type=retention_type,
        checkpoint_interval_s=3600,
        sinks=["a"],
        backoff_s=[1, 2],
        end_stream_cuts={stream.full_name: {"0": 8, "1": 8}},
    )
    first = post_read(api, max_events=4).json()["deliveries"]
    # (an AUTOMATIC group's first acknowledgement checkpoints: the next is an hour away)
    second = post_read(api, max_events=4, ack={"delivery_ids": ids(first), "sink": "a"}).json()["deliveries"]

    # when the next read carries the batch's ack
    with CaptureQueriesContext(connection) as queries:
        body = post_read(api, max_events=4, ack={"delivery_ids": ids(second), "sink": "a"}).json()

    # then the database saw the group and its positions loaded by one query and the floors moved
    # by one UPDATE: nothing the query leaves out (groups.consuming.floors) was loaded after
    assert body["ack"]["acked"] == 4 and len(body["deliveries"]) == 4
    sql = [q["sql"].split()[0] for q in queries.captured_queries]
    assert sql == ["SELECT", "UPDATE"], [q["sql"][:120] for q in queries.captured_queries]
    # and so did an ack of its own
    with CaptureQueriesContext(connection) as queries:
        acked = api.post(G + "ack/", {"delivery_ids": ids(body["deliveries"]), "sink": "a"}, format="json").json()
    assert acked["acked"] == 4
    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["SELECT", "UPDATE"]


def test_an_automatic_groups_read_carrying_an_ack_checkpoints_as_an_ack_does(api, stream, clock):
    # given an AUTOMATIC group whose periodic checkpoint is due, and a batch handed out
    create(api, checkpoint_interval_s=60)
    first = post_read(api, max_events=4).json()["deliveries"]
    assert not Checkpoint.objects.filter(reader_group__name="billing").exists()

    # when a read carries the batch's ack
    post_read(api, max_events=4, ack={"delivery_ids": ids(first)})

    # then the group checkpointed at the floors the ack moved
    (auto,) = Checkpoint.objects.filter(reader_group__name="billing", name__startswith="auto-")
    assert auto.cuts == {stream.full_name: {"0": 2, "1": 2}}


def test_a_lost_lease_is_listed_the_rest_acknowledged_and_the_read_goes_on(api, stream, clock):
    create(api, ack_timeout_s=5)
    first = post_read(api, max_events=2).json()["deliveries"]
    clock.now += 6  # both leases expire: the next read hands them out again
    again = post_read(api, max_events=2).json()["deliveries"]
    d0 = again[0]
    old = next(d for d in first if d["segment"] != d0["segment"])["delivery_id"]  # its event is live again
    body = post_read(api, max_events=3, ack={"delivery_ids": [d0["delivery_id"], old]}).json()
    assert body["ack"]["acked"] == 1
    assert body["ack"]["refused"] == [{"field": "ack.delivery_ids[1]", "delivery_id": old, "reason": "stale"}]
    assert len(body["deliveries"]) == 3


@pytest.mark.parametrize(
    "ack, field",
    [
        ([], "ack"),
        ("abc", "ack"),
        ({"delivery_ids": []}, "ack.delivery_ids"),
        ({}, "ack.delivery_ids"),
        ({"delivery_ids": ["nonsense"]}, "ack.delivery_ids[0]"),
        ({"ids": []}, "ack.ids"),
        ({"delivery_ids": ["x"], "sink": "search"}, "ack.sink"),
    ],
)
def test_a_bad_ack_refuses_the_whole_read_and_applies_nothing(api, stream, clock, ack, field):
    create(api)
    mine = post_read(api, max_events=2).json()["deliveries"]
    if isinstance(ack, dict) and ack.get("delivery_ids") == ["x"]:
        ack = {**ack, "delivery_ids": ids(mine)}
    response = post_read(api, max_events=5, ack=ack)
    assert response.status_code == 400 and response.json()["field"] == field, response.content
    assert set(floors().values()) == {0}  # nothing acknowledged
    # nothing handed out either: the next read gets the 18 events not yet handed out
    assert len(post_read(api, max_events=100).json()["deliveries"]) == 18


def test_an_id_of_another_group_refuses_the_read_before_anything(api, stream, clock):
    create(api)
    create(api, name="other")
    mine = post_read(api, max_events=1).json()["deliveries"]
    theirs = api.post(URL + "shop/other/read/", {"max_events": 1}, format="json").json()["deliveries"]
    response = post_read(api, max_events=5, ack={"delivery_ids": ids(mine) + ids(theirs)})
    assert response.status_code == 400
    assert response.json()["field"] == "ack.delivery_ids[1]" and response.json()["code"] == "unknown_delivery"
    assert api.post(G + "ack/", {"delivery_ids": ids(mine)}, format="json").json()["acked"] == 1


def test_a_fan_out_groups_read_acknowledges_for_its_sink(api, stream, clock):
    create(api, sinks=["archive", "search"], streams=["shop/orders"])
    got = post_read(api, max_events=20).json()["deliveries"]
    body = post_read(api, max_events=5, ack={"delivery_ids": ids(got), "sink": "search"}).json()
    assert body["ack"] == {"acked": 0, "waiting_for_sinks": 20, "given_back": 0, "refused": []}
    body = post_read(api, max_events=5, ack={"delivery_ids": ids(got), "sink": "archive"}).json()
    assert body["ack"]["acked"] == 20 and floors() == {"0": 10, "1": 10}


def test_a_retried_read_with_the_same_ack_acknowledges_nothing_twice(api, stream, clock):
    create(api)
    got = post_read(api, max_events=4).json()["deliveries"]
    once = post_read(api, max_events=2, ack={"delivery_ids": ids(got)}).json()
    twice = post_read(api, max_events=2, ack={"delivery_ids": ids(got)}).json()
    assert once["ack"]["acked"] == 4 and twice["ack"] == {
        "acked": 0,
        "waiting_for_sinks": 0,
        "given_back": 0,
        "refused": [],
    }
    assert floors() == {"0": 2, "1": 2}


def test_after_redis_loses_its_state_the_ack_is_refused_and_the_read_resumes_at_the_floor(
    api, stream, clock, redis_url
):
    create(api, streams=["shop/orders"])
    got = post_read(api, max_events=4).json()["deliveries"]  # offsets 0 and 1 of each segment
    firsts = [d for d in got if d["offset"] == 0]
    api.post(G + "ack/", {"delivery_ids": ids(firsts)}, format="json")
    client = redis.Redis.from_url(redis_url)
    client.delete(*client.keys("cbr:acks:*"))
    body = post_read(api, max_events=20, ack={"delivery_ids": [d["delivery_id"] for d in got if d["offset"]]}).json()
    assert body["ack"]["acked"] == 0 and {r["reason"] for r in body["ack"]["refused"]} == {"lost"}
    # what was not acknowledged before Redis lost it comes again (at least once)
    offsets = sorted((d["segment"], d["offset"]) for d in body["deliveries"])
    assert offsets == sorted([(s, o) for s in "01" for o in range(1, 10)])


def expand(ranges):
    """A read's id ranges as the delivery ids they name."""
    out = []
    for r in ranges:
        prefix, offsets, epoch = r.rsplit("-", 2)
        first, last = offsets.split("..")
        out += [f"{prefix}-{o}-{epoch}" for o in range(int(first), int(last) + 1)]
    return out


def test_a_read_asked_for_ranges_names_exactly_its_deliveries_and_an_ack_takes_them(api, stream, clock):
    create(api)
    body = post_read(api, max_events=12, ranges=True).json()
    assert len(body["delivery_ranges"]) == 2  # a run per segment
    assert sorted(expand(body["delivery_ranges"])) == sorted(ids(body["deliveries"]))
    answer = api.post(G + "ack/", {"delivery_ids": body["delivery_ranges"]}, format="json")
    assert answer.json() == {"acked": 12, "waiting_for_sinks": 0, "given_back": 0}
    assert floors() == {"0": 6, "1": 6}
    rest = post_read(api, max_events=20, ranges=True, ack={"delivery_ids": body["delivery_ranges"]}).json()
    assert rest["ack"]["acked"] == 0 and len(rest["deliveries"]) == 8  # acknowledged once only


def test_redeliveries_come_as_ranges_of_their_own_epoch(api, stream, clock):
    create(api, ack_timeout_s=5)
    post_read(api, max_events=4)
    clock.now += 6
    body = post_read(api, max_events=6, ranges=True).json()
    assert sorted(expand(body["delivery_ranges"])) == sorted(ids(body["deliveries"]))
    assert {r.rsplit("-", 1)[1] for r in body["delivery_ranges"]} == {"1", "2"}
    assert api.post(G + "nack/", {"delivery_ids": body["delivery_ranges"]}, format="json").json()["given_back"] == 6


def test_a_range_with_lost_leases_refuses_each_delivery_by_its_own_id(api, stream, clock):
    create(api, ack_timeout_s=5, streams=["shop/orders"])
    first = post_read(api, max_events=4, ranges=True).json()
    clock.now += 6
    again = post_read(api, max_events=4, ranges=True).json()  # handed out again: the first leases are void
    mixed = [again["delivery_ranges"][0], *first["delivery_ranges"]]
    answer = api.post(G + "ack/", {"delivery_ids": mixed}, format="json")
    assert answer.status_code == 409 and answer.json()["code"] == "lease_lost", answer.content
    acked = len(expand(again["delivery_ranges"][:1]))
    assert answer.json()["acked"] == acked
    refused = answer.json()["refused"]
    where = lambda d: d.rsplit("-", 1)[0]  # noqa: E731 - the delivery's event: its id without the epoch
    done = {where(d) for d in expand(again["delivery_ranges"][:1])}  # processed by the new range
    assert [r["delivery_id"] for r in refused] == [d for d in expand(first["delivery_ranges"]) if where(d) not in done]
    assert {r["reason"] for r in refused} == {"stale"}
    assert {r["field"] for r in refused} <= {"delivery_ids[1]", "delivery_ids[2]"}


def test_bad_ranges_are_refused_naming_the_range_and_apply_nothing(api, stream, clock, settings):
    create(api)
    create(api, name="other")
    prefix = post_read(api, max_events=20).json()["deliveries"][0]["delivery_id"].rsplit("-", 2)[0]
    theirs = api.post(URL + "shop/other/read/", {"max_events": 1}, format="json").json()["deliveries"][0]
    settings.CBR_MAX_READ_EVENTS = 10
    for bad in [
        f"{prefix}-5..2-1",  # backwards
        f"{prefix}-0..10-1",  # eleven: past the bound
        f"{prefix}-00..2-1",  # not as the server writes numbers
        f"{prefix}-0..-1",
        theirs["delivery_id"].rsplit("-", 2)[0] + "-0..0-1",  # another group's
    ]:
        response = api.post(G + "ack/", {"delivery_ids": [f"{prefix}-9-1", bad]}, format="json")
        assert response.status_code == 400 and response.json()["field"] == "delivery_ids[1]", (bad, response.content)
    response = api.post(
        G + "ack/", {"delivery_ids": [f"{prefix}-0..4-1", f"{prefix}-5..9-1", f"{prefix}-9-1"]}, format="json"
    )
    assert response.status_code == 400 and response.json()["field"] == "delivery_ids[2]"  # eleven in all
    assert set(floors().values()) == {0}


def test_scripts_redis_forgot_are_loaded_again_and_every_step_still_applies_once(api, stream, clock, redis_url):
    """Pipelines send their scripts by EVALSHA alone: after SCRIPT FLUSH (or a Redis restart that
    kept the data) each script answers NOSCRIPT, is loaded, and runs once."""
    create(api)
    client = redis.Redis.from_url(redis_url)
    first = post_read(api, max_events=4, ranges=True).json()
    client.script_flush()
    body = post_read(api, max_events=4, ranges=True, ack={"delivery_ids": first["delivery_ranges"]}).json()
    assert body["ack"]["acked"] == 4 and len(body["deliveries"]) == 4
    assert not set(ids(first["deliveries"])) & set(ids(body["deliveries"]))  # handed out once, not twice
    client.script_flush()
    answer = api.post(G + "ack/", {"delivery_ids": body["delivery_ranges"]}, format="json").json()
    assert answer["acked"] == 4 and floors() == {"0": 4, "1": 4}


def test_after_redis_forgot_its_scripts_the_carried_ack_still_frees_room_before_the_read(api, stream, clock, redis_url):
    # given a group at its max_ack_pending, and Redis that forgot its scripts, then relearned
    # the counting one (a read found no room) but not the ack's
    create(api, max_ack_pending=4)
    first = post_read(api, max_events=4, ranges=True).json()
    redis.Redis.from_url(redis_url).script_flush()
    assert post_read(api, max_events=4).json()["pending_limit_reached"]

    # when a read carries the batch's ack (the ack script answers NOSCRIPT, and runs after the
    # read's counts on the same pipeline)
    body = post_read(api, max_events=4, ranges=True, ack={"delivery_ids": first["delivery_ranges"]}).json()

    # then the counts are taken again after it: the room the ack freed is used
    assert body["ack"]["acked"] == 4 and not body["pending_limit_reached"]
    assert len(body["deliveries"]) == 4
