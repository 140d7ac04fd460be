"""Consuming through a reader group over REST (docs/design/acks.md): read, ack, nack, poison,
checkpoints, updates, against the real segment store and Redis."""

from datetime import timedelta

import factories
import pytest
import redis
from django.utils import timezone

from domain.events import EventIn
from groups import consuming
from groups.consuming.floors import persist_floors
from groups.models import Checkpoint, ReaderGroup, ReadPosition, Subscription
from retention.dead_letters import create_dead_letter_stream
from retention.models import RetentionPolicy
from streams import logs, services
from streams.models import Stream

pytestmark = pytest.mark.django_db

URL = "/api/v1/reader-groups/"
G = URL + "shop/billing/"


key_for = factories.routing_key_for


@pytest.fixture
def stream():
    """Ten events on each of two segments: e0..e9 on segment 0, f0..f9 on segment 1."""
    stream = factories.make_stream(segment_count=2)
    services.do_publish(stream, [EventIn(f"e{i}".encode(), routing_key=key_for(stream, "0")) for i in range(10)])
    services.do_publish(stream, [EventIn(f"f{i}".encode(), routing_key=key_for(stream, "1")) for i in range(10)])
    return stream


def create(api, **body):
    """shop/billing on shop/orders, released at its last checkpoint unless `body` says otherwise."""
    return factories.create_group_over_api(api, **{"retention_type": "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT", **body})


def read(api, n, **extra):
    response = api.post(G + "read/", {"max_events": n, **extra}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def ids(deliveries):
    return [d["delivery_id"] for d in deliveries]


def floors(api):
    return {(p["stream"], p["segment"]): p["floor"] for p in api.get(G).json()["positions"]}


def segments_of(stream):
    return "0", "1"


def test_read_hands_out_in_order_per_segment_fairly_and_never_twice(api, stream, clock):
    create(api)
    first = read(api, 6)["deliveries"]
    by_seg = {}
    for d in first:
        by_seg.setdefault(d["segment"], []).append(d["offset"])
        assert d["delivery_count"] == 1 and d["stream"] == "shop/orders"
    assert by_seg == {"0": [0, 1, 2], "1": [0, 1, 2]}  # 3 from each: fair across segments
    second = read(api, 100)["deliveries"]
    assert len(second) == 14  # the rest, nothing of the first read again while its leases live
    assert not {(d["segment"], d["offset"]) for d in first} & {(d["segment"], d["offset"]) for d in second}
    assert read(api, 5)["deliveries"] == []
    assert {d["payload"] for d in first + second} == {f"e{i}" for i in range(10)} | {f"f{i}" for i in range(10)}


def test_out_of_order_acks_move_the_persisted_floor_over_the_acked_prefix_only(api, stream, clock):
    create(api)
    a, _ = segments_of(stream)
    got = [d for d in read(api, 20)["deliveries"] if d["segment"] == a]
    by_offset = {d["offset"]: d["delivery_id"] for d in got}
    answer = api.post(G + "ack/", {"delivery_ids": [by_offset[3], by_offset[1], by_offset[2]]}, format="json")
    assert answer.status_code == 200 and answer.json()["acked"] == 3
    assert floors(api)[("shop/orders", a)] == 0  # 0 is not acknowledged yet
    api.post(G + "ack/", {"delivery_ids": [by_offset[0]]}, format="json")
    assert floors(api)[("shop/orders", a)] == 4
    row = ReadPosition.objects.get(subscription__reader_group__name="billing", segment_id=a)
    assert row.floor == 4
    again = api.post(G + "ack/", {"delivery_ids": [by_offset[0]]}, format="json")  # a retried request
    assert again.status_code == 200 and again.json()["acked"] == 0


def test_an_expired_lease_is_redelivered_and_the_old_ack_refused_while_the_rest_apply(api, stream, clock):
    create(api, ack_timeout_s=5)
    first = read(api, 2)["deliveries"]
    clock.now += 6
    again = read(api, 2)["deliveries"]
    assert sorted((d["segment"], d["offset"], d["delivery_count"]) for d in again) == sorted(
        (d["segment"], d["offset"], 2) for d in first
    )
    d0 = again[0]
    old = next(d for d in first if d["segment"] != d0["segment"])
    answer = api.post(G + "ack/", {"delivery_ids": [d0["delivery_id"], old["delivery_id"]]}, format="json")
    assert answer.status_code == 409, answer.content
    body = answer.json()
    assert body["code"] == "lease_lost" and body["field"] == "delivery_ids[1]" and body["acked"] == 1
    assert floors(api)[("shop/orders", d0["segment"])] == 1
    assert floors(api)[("shop/orders", old["segment"])] == 0


@pytest.mark.parametrize(
    "body, field",
    [
        ({"max_events": 0}, "max_events"),
        ({"max_events": 10_001}, "max_events"),
        ({"max_events": "5"}, "max_events"),
        ({}, "max_events"),
        ({"max_events": 5, "wait_ms": -1}, "wait_ms"),
        ({"max_events": 5, "wait_ms": 600_000}, "wait_ms"),
        ({"max_events": 5, "colour": "red"}, "colour"),
    ],
)
def test_bad_reads_name_the_field(api, stream, body, field):
    create(api)
    response = api.post(G + "read/", body, format="json")
    assert response.status_code == 400 and response.json()["field"] == field
    assert read(api, 1)["deliveries"]  # nothing was handed out by the refused read


def test_bad_acks_name_the_field_and_apply_nothing(api, stream, clock):
    create(api)
    create(api, name="other")
    mine = read(api, 2)["deliveries"]
    theirs = api.post(URL + "shop/other/read/", {"max_events": 1}, format="json").json()["deliveries"]
    cases = [
        ({"delivery_ids": []}, 400, "delivery_ids"),
        ({"delivery_ids": "abc"}, 400, "delivery_ids"),
        ({"delivery_ids": [mine[0]["delivery_id"], "nonsense"]}, 400, "delivery_ids[1]"),
        ({"delivery_ids": [mine[0]["delivery_id"], theirs[0]["delivery_id"]]}, 400, "delivery_ids[1]"),
        ({"delivery_ids": [mine[0]["delivery_id"]], "sink": "search"}, 400, "sink"),
        ({"delivery_ids": [mine[0]["delivery_id"]], "extra": 1}, 400, "extra"),
    ]
    for body, status, field in cases:
        response = api.post(G + "ack/", body, format="json")
        assert response.status_code == status, (body, response.content)
        assert response.json()["field"] == field
    forged = mine[0]["delivery_id"].rsplit("-", 2)[0] + "-9-1"  # an offset never handed out
    response = api.post(G + "ack/", {"delivery_ids": [forged]}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "unknown_delivery"
    assert set(floors(api).values()) == {0}
    for body, field in [
        ({"delivery_ids": ids(mine), "delay_ms": -1}, "delay_ms"),
        ({"delivery_ids": ids(mine), "delay_ms": "5"}, "delay_ms"),
    ]:
        response = api.post(G + "nack/", body, format="json")
        assert response.status_code == 400 and response.json()["field"] == field
    assert api.post(G + "ack/", {"delivery_ids": ids(mine)}, format="json").json()["acked"] == 2


def test_a_nack_with_a_delay_redelivers_once_due(api, stream, clock):
    create(api, streams=["shop/orders"])
    (d,) = read(api, 1)["deliveries"]
    nacked = api.post(G + "nack/", {"delivery_ids": [d["delivery_id"]], "delay_ms": 3000}, format="json")
    assert nacked.json() == {"acked": 0, "waiting_for_sinks": 0, "given_back": 1}, nacked.content
    later = read(api, 30)["deliveries"]
    assert (d["segment"], d["offset"]) not in {(x["segment"], x["offset"]) for x in later}
    clock.now += 3
    (again,) = read(api, 5)["deliveries"]
    assert (again["segment"], again["offset"], again["delivery_count"]) == (d["segment"], d["offset"], 2)


def test_poison_goes_to_the_dead_letter_stream_with_its_reason(api, stream, clock):
    create(api, max_deliveries=2)
    got = read(api, 20)["deliveries"]
    d = next(x for x in got if (x["segment"], x["offset"]) == ("0", 3))
    api.post(G + "ack/", {"delivery_ids": [x["delivery_id"] for x in got if x is not d]}, format="json")
    api.post(G + "nack/", {"delivery_ids": [d["delivery_id"]], "reason": "bad input 0"}, format="json")
    (again,) = read(api, 20)["deliveries"]
    assert (again["segment"], again["offset"], again["delivery_count"]) == ("0", 3, 2)
    api.post(G + "nack/", {"delivery_ids": [again["delivery_id"]], "reason": "bad input 1"}, format="json")
    assert floors(api)[("shop/orders", "0")] == 3
    assert read(api, 100)["deliveries"] == []  # out of deliveries: dead-lettered on the way
    assert floors(api)[("shop/orders", "0")] == 10
    dlq = Stream.objects.get(name="orders-dlq")
    (event,), _ = logs.read_events(dlq, {"0": 0}, 10)
    headers = event.record.headers
    assert event.record.payload.decode() == d["payload"]
    assert headers["cbr-dlq-reason"] == "bad input 1"
    assert headers["cbr-dlq-stream"] == "shop/orders" and headers["cbr-dlq-offset"] == str(d["offset"])
    assert headers["cbr-dlq-deliveries"] == "2"
    positions = {p["segment"]: p for p in api.get(G).json()["positions"]}
    assert positions["0"]["dead_lettered"] == 1 and positions["0"]["redelivered"] == 1
    # the dead-letter stream does not grow for ever: without a scope default, CBR_DLQ_RETENTION_S
    policy = api.get("/api/v1/streams/shop/orders-dlq/").json()["retention_policy"]
    assert (policy["limit_type"], policy["min"], policy["consumption_based"]) == ("time", 7 * 86_400, False)


def test_a_dead_letter_stream_takes_its_scopes_default_policy_or_none_when_so_set(
    api, stream, clock, settings, data_dir
):
    api.put("/api/v1/scopes/shop/defaults/", {"retention_policy": {"limit_type": "size", "min": 1000}}, format="json")
    create(api, max_deliveries=1)
    for d in read(api, 20)["deliveries"]:
        if d["offset"] == 3:
            api.post(G + "nack/", {"delivery_ids": [d["delivery_id"]]}, format="json")
    read(api, 20)
    dlq = api.get("/api/v1/streams/shop/orders-dlq/").json()
    assert dlq["retention_policy"]["limit_type"] == "size" and dlq["retention_policy"]["min"] == 1000
    assert "retention_policy" in dlq["inherited_from_scope"]  # follows the scope's default as it changes

    # and with CBR_DLQ_RETENTION_S 0, where the scope has no default: no policy, kept until deleted
    settings.CBR_DLQ_RETENTION_S = 0
    kept = create_dead_letter_stream(scope="elsewhere", name="x-dlq", segment_count=1, description="")
    assert not RetentionPolicy.objects.filter(stream=kept).exists()


def test_a_dead_letter_into_a_full_dead_letter_stream_waits_and_is_never_lost(api, stream, clock):
    # given a dead-letter stream that refuses publishing (at its max under reject_publish)
    dlq = factories.make_stream("orders-dlq", on_max_limit="reject_publish")
    Stream.objects.filter(pk=dlq.pk).update(full_since=timezone.now())
    create(api, max_deliveries=1)
    got = read(api, 20)["deliveries"]
    bad = next(x for x in got if (x["segment"], x["offset"]) == ("0", 3))
    api.post(G + "ack/", {"delivery_ids": [x["delivery_id"] for x in got if x is not bad]}, format="json")
    api.post(G + "nack/", {"delivery_ids": [bad["delivery_id"]]}, format="json")
    # when the poison event is to be dead-lettered: the read still answers, and the event is held
    assert read(api, 100)["deliveries"] == []
    assert floors(api)[("shop/orders", "0")] == 3
    assert logs.stream_state(dlq).event_count == 0
    # then once the dead-letter stream takes events again, it is appended and passed
    Stream.objects.filter(pk=dlq.pk).update(full_since=None)
    clock.now += 60  # its claim expired
    assert read(api, 100)["deliveries"] == []
    assert floors(api)[("shop/orders", "0")] == 10
    (event,), _ = logs.read_events(Stream.objects.get(pk=dlq.pk), {"0": 0}, 10)
    assert event.record.payload.decode() == bad["payload"]


def test_halt_stops_the_floor_until_the_policy_changes(api, stream, clock):
    group = create(api, max_deliveries=1, on_poison="halt")
    a, _ = segments_of(stream)
    got = read(api, 20)["deliveries"]
    bad = next(d for d in got if d["segment"] == a and d["offset"] == 2)
    api.post(G + "nack/", {"delivery_ids": [bad["delivery_id"]]}, format="json")
    api.post(G + "ack/", {"delivery_ids": [x["delivery_id"] for x in got if x is not bad]}, format="json")
    assert read(api, 10)["deliveries"] == []
    positions = {p["segment"]: p for p in api.get(G).json()["positions"]}
    assert positions[a]["halted_at"] == 2 and positions[a]["floor"] == 2
    response = api.patch(G, {"on_poison": "skip", "generation": group["generation"]}, format="json")
    assert response.status_code == 200 and response.json()["generation"] == group["generation"] + 1
    read(api, 10)
    positions = {p["segment"]: p for p in api.get(G).json()["positions"]}
    assert positions[a]["halted_at"] is None and positions[a]["floor"] == 10


def test_max_ack_pending_holds_back_a_consumer_until_it_acks(api, stream, clock):
    create(api, max_ack_pending=3)
    first = read(api, 10)
    assert len(first["deliveries"]) == 3
    blocked = read(api, 10)
    assert blocked["deliveries"] == [] and blocked["pending_limit_reached"]
    api.post(G + "ack/", {"delivery_ids": ids(first["deliveries"][:2])}, format="json")
    assert len(read(api, 10)["deliveries"]) == 2


def test_a_delayed_event_is_handed_out_only_when_due_and_holds_the_floor(api, clock):
    stream = factories.make_stream()
    due_ms = int((clock.now + 60) * 1000)
    services.do_publish(stream, [EventIn(b"now-0"), EventIn(b"later", deliver_at_ms=due_ms), EventIn(b"now-2")])
    create(api)
    got = read(api, 10)["deliveries"]
    assert [d["payload"] for d in got] == ["now-0", "now-2"]
    api.post(G + "ack/", {"delivery_ids": ids(got)}, format="json")
    assert floors(api)[("shop/orders", "0")] == 1  # waits for the delayed event
    clock.now += 61
    (later,) = read(api, 10)["deliveries"]
    assert later["payload"] == "later" and later["deliver_at"] is not None
    api.post(G + "ack/", {"delivery_ids": [later["delivery_id"]]}, format="json")
    assert floors(api)[("shop/orders", "0")] == 3


def test_a_group_behind_a_truncation_continues_at_the_head_and_is_told_what_it_missed(api, stream, clock):
    create(api, retention_type="NONE")
    a, b = segments_of(stream)
    read(api, 2)  # offset 0 of each segment, never acknowledged
    logs.stream_log(stream).truncate({a: 5, b: 0})
    answer = read(api, 100)
    assert answer["missed"] == 5 and answer["missed_by_stream"] == {"shop/orders": 5}
    assert min(d["offset"] for d in answer["deliveries"] if d["segment"] == a) == 5
    positions = {p["segment"]: p for p in api.get(G).json()["positions"]}
    assert positions[a]["missed"] == 5 and positions[a]["floor"] == 5


def test_a_fan_out_event_counts_once_every_sink_acknowledged_it(api, stream, clock):
    create(api, sinks=["archive", "search"], streams=["shop/orders"])
    got = read(api, 20)["deliveries"]
    assert api.post(G + "ack/", {"delivery_ids": ids(got), "sink": "search"}, format="json").json() == {
        "acked": 0,
        "waiting_for_sinks": 20,
        "given_back": 0,
    }
    assert set(floors(api).values()) == {0}
    response = api.post(G + "ack/", {"delivery_ids": ids(got)}, format="json")
    assert response.status_code == 400 and response.json()["field"] == "sink"
    assert api.post(G + "ack/", {"delivery_ids": ids(got), "sink": "archive"}, format="json").json()["acked"] == 20
    assert set(floors(api).values()) == {10}


def test_after_redis_forgets_everything_delivery_resumes_at_the_persisted_floor(api, stream, clock, redis_url):
    create(api, streams=["shop/orders"])
    a, _ = segments_of(stream)
    got = [d for d in read(api, 20)["deliveries"] if d["segment"] == a]
    api.post(G + "ack/", {"delivery_ids": ids(got[:4])}, format="json")
    client = redis.Redis.from_url(redis_url)
    client.delete(*client.keys("cbr:acks:*"))
    again = [d for d in read(api, 20)["deliveries"] if d["segment"] == a]
    assert [d["offset"] for d in again] == list(range(4, 10))  # unacked ones come again, acked do not


def test_an_automatic_group_publishes_its_floor_at_each_checkpoint(api, stream, clock):
    RetentionPolicy.objects.create(stream=stream, limit_type="size", min_value=0, consumption_based=True)
    create(api)
    a, b = segments_of(stream)
    got = read(api, 20)["deliveries"]
    api.post(
        G + "ack/",
        {"delivery_ids": [d["delivery_id"] for d in got if d["segment"] == a and d["offset"] < 6]},
        format="json",
    )
    response = api.post(G + "checkpoints/", {"name": "half", "persist": True}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["cuts"] == {"shop/orders": {a: 6, b: 0}}
    sub = Subscription.objects.get(reader_group__name="billing")
    assert sub.acknowledgement_cut == {a: 6, b: 0}  # handed out but unacknowledged: not released
    assert sub.acknowledgement_sizes[a] == logs.stream_log(stream).segment(a).size_till(6)
    dup = api.post(G + "checkpoints/", {"name": "half"}, format="json")
    assert dup.status_code == 409 and dup.json()["field"] == "name"
    auto = api.post(G + "checkpoints/", {"name": "auto-x"}, format="json")
    assert auto.status_code == 400 and auto.json()["field"] == "name"
    listed = api.get(G + "checkpoints/").json()
    assert listed["next"] is None  # a list as every list is, `next` included (the last 100)
    names = [c["name"] for c in listed["results"]]
    assert "half" in names and all(n == "half" or n.startswith("auto-") for n in names)


def test_a_manual_group_releases_at_a_persisted_checkpoint(api, stream, clock):
    create(api, retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT")
    a, b = segments_of(stream)
    got = read(api, 20)["deliveries"]
    api.post(G + "ack/", {"delivery_ids": [d["delivery_id"] for d in got if d["segment"] == b]}, format="json")
    api.post(G + "checkpoints/", {"name": "cp1", "persist": True}, format="json")
    api.post(G + "checkpoints/", {"name": "cp2"}, format="json")
    sub = Subscription.objects.get(reader_group__name="billing")
    assert sub.acknowledgement_cut == {a: 0, b: 0}  # a MANUAL group's checkpoint releases nothing by itself
    assert api.post(G + "checkpoints/cp2/release/").status_code == 409
    missing = api.post(G + "checkpoints/nope/release/")
    assert missing.status_code == 404 and missing.json()["field"] == "checkpoint"
    released = api.post(G + "checkpoints/cp1/release/")
    assert released.status_code == 200, released.content
    sub.refresh_from_db()
    assert sub.acknowledgement_cut == {a: 0, b: 10}


def test_updates_check_the_generation_and_move_subscriptions(api, stream, clock):
    factories.make_stream("refunds")
    group = create(api)
    stale = api.patch(G, {"max_deliveries": 9, "generation": group["generation"] + 5}, format="json")
    assert stale.status_code == 409 and stale.json()["field"] == "generation"
    bad = api.patch(G, {"ack_timeout_s": 0}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "ack_timeout_s"
    moved = api.patch(G, {"streams": ["shop/refunds"], "generation": 0}, format="json").json()
    assert [s["stream"] for s in moved["streams"]] == ["shop/refunds"] and moved["generation"] == 1
    assert not Subscription.objects.filter(reader_group__name="billing", stream=stream).exists()
    none = api.patch(G, {"retention_type": "NONE"}, format="json").json()
    assert none["retention_type"] == "NONE" and none["generation"] == 2
    assert ReaderGroup.objects.get(name="billing").max_deliveries == 5  # the stale update changed nothing


def test_a_subscriber_becoming_one_again_is_subscribed_at_its_floor(api, stream, clock):
    create(api, retention_type="NONE")
    a, b = segments_of(stream)
    got = read(api, 20)["deliveries"]
    api.post(G + "ack/", {"delivery_ids": [d["delivery_id"] for d in got if d["segment"] == a]}, format="json")
    api.patch(G, {"retention_type": "MANUAL_RELEASE_AT_USER_STREAMCUT"}, format="json")
    assert Subscription.objects.get(reader_group__name="billing").acknowledgement_cut == {a: 10, b: 0}


def test_a_stale_sink_never_completes_a_delivery_and_sink_names_are_checked(api, stream, clock):
    create(api, sinks=["a", "b"])
    got = read(api, 1)["deliveries"]
    api.post(G + "ack/", {"delivery_ids": ids(got), "sink": "a"}, format="json")
    api.patch(G, {"sinks": ["b", "c"]}, format="json")
    assert api.post(G + "ack/", {"delivery_ids": ids(got), "sink": "b"}, format="json").json()["waiting_for_sinks"] == 1
    assert set(floors(api).values()) == {0}  # "a" acked under the old sinks: c has not
    assert api.post(G + "ack/", {"delivery_ids": ids(got), "sink": "c"}, format="json").json()["acked"] == 1
    bad = api.patch(G, {"sinks": ["x,y"]}, format="json")
    assert bad.status_code == 400 and bad.json()["field"].startswith("sinks")


def test_acks_redis_knows_nothing_of_are_refused_not_a_500(api, stream, clock, redis_url):
    create(api)
    got = read(api, 2)["deliveries"]
    redis.Redis.from_url(redis_url).flushdb()
    # handed out before Redis lost the state: their leases went with it
    response = api.post(G + "ack/", {"delivery_ids": ids(got)}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "lease_lost", response.content
    assert {r["reason"] for r in response.json()["refused"]} == {"lost"}
    # never handed out: unknown
    far = got[0]["delivery_id"].rsplit("-", 2)[0] + "-5000000000-1"
    response = api.post(G + "ack/", {"delivery_ids": [far]}, format="json")
    assert response.status_code == 400 and response.json()["field"] == "delivery_ids[0]"


def test_huge_timeouts_are_refused_at_create(api, stream):
    response = api.post(
        URL, {"scope": "shop", "name": "x", "streams": ["shop/orders"], "ack_timeout_s": 10**12}, format="json"
    )
    assert response.status_code == 400 and response.json()["field"] == "ack_timeout_s"


def test_redeliveries_past_a_reads_byte_cap_are_all_handed_out_and_dead_lettered(api, clock):
    stream = factories.make_stream()
    big = "x" * (1024 * 1024)
    for i in range(12):
        services.do_publish(stream, [EventIn(f"{i:02d}{big}".encode())])
    create(api, max_deliveries=2, ack_timeout_s=5)
    first = read(api, 12)["deliveries"]
    assert len(first) == 12
    clock.now += 6
    again = read(api, 12)["deliveries"]  # 12 MiB of redeliveries: more than one read's byte cap
    assert [d["offset"] for d in again] == list(range(12))
    clock.now += 6
    assert read(api, 12)["deliveries"] == []  # out of deliveries: all dead-lettered
    assert floors(api)[("shop/orders", "0")] == 12
    dlq = Stream.objects.get(name="orders-dlq")
    events, _ = logs.read_events(dlq, {"0": 0}, 100)
    assert sorted(e.record.payload[:2].decode() for e in events) == [f"{i:02d}" for i in range(12)]


def test_two_groups_each_receive_every_delayed_event_and_a_slow_one_holds_back_nobody(api, clock):
    stream = factories.make_stream()
    base_ms = int(clock.now * 1000)
    services.do_publish(stream, [EventIn(f"d{i}".encode(), deliver_at_ms=base_ms + (5 - i) * 10_000) for i in range(5)])
    create(api)
    create(api, name="slow")
    assert read(api, 10)["deliveries"] == []  # nothing due yet
    got = []
    for _ in range(6):
        clock.now += 10
        batch = read(api, 10)["deliveries"]
        api.post(G + "ack/", {"delivery_ids": ids(batch)}, format="json")
        got += [d["payload"] for d in batch]
    assert got == ["d4", "d3", "d2", "d1", "d0"]  # by due time, not by offset; none early
    assert floors(api)[("shop/orders", "0")] == 5
    slow = api.post(URL + "shop/slow/read/", {"max_events": 10}, format="json").json()["deliveries"]
    assert sorted(d["payload"] for d in slow) == ["d0", "d1", "d2", "d3", "d4"]  # all due now


def test_delayed_events_due_together_come_out_by_due_time_then_offset(api, clock):
    stream = factories.make_stream()
    base_ms = int(clock.now * 1000)
    due = [30, 10, 20, 10, 40]  # seconds from now, by offset
    services.do_publish(
        stream, [EventIn(f"o{i}".encode(), deliver_at_ms=base_ms + d * 1000) for i, d in enumerate(due)]
    )
    create(api)
    assert read(api, 10)["deliveries"] == []
    clock.now += 60  # all due at once
    got = read(api, 10)["deliveries"]
    assert [d["payload"] for d in got] == ["o1", "o3", "o2", "o0", "o4"]


def test_beat_checkpoints_automatic_groups_when_due_and_keeps_the_last_three(api, stream, clock):
    create(api, checkpoint_interval_s=60)
    create(api, name="manual", retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT")
    got = [d for d in read(api, 20)["deliveries"] if d["segment"] == "0" and d["offset"] < 3]
    api.post(G + "ack/", {"delivery_ids": ids(got)}, format="json")  # the first ack checkpoints at once
    group = ReaderGroup.objects.get(name="billing")
    assert Subscription.objects.get(reader_group=group).acknowledgement_cut == {"0": 3, "1": 0}
    assert consuming.periodic_checkpoints() == 0  # not due: the interval has not passed
    for _ in range(4):
        ReaderGroup.objects.filter(pk=group.pk).update(last_checkpoint_at=timezone.now() - timedelta(seconds=61))
        assert consuming.periodic_checkpoints() == 1  # only the AUTOMATIC group, once due
    autos = Checkpoint.objects.filter(reader_group=group, name__startswith="auto-")
    assert autos.count() == 3 and all(c.cuts == {"shop/orders": {"0": 3, "1": 0}} for c in autos)
    assert not Checkpoint.objects.filter(reader_group__name="manual").exists()


def test_reads_acks_and_nacks_of_an_unknown_group_are_the_same_404_as_its_detail(api, stream, clock):
    create(api)
    detail = api.get(URL + "shop/nobody/")
    assert detail.status_code == 404
    for path, body in (
        ("read/", {"max_events": 1}),
        ("ack/", {"delivery_ids": ["1-1-0-0-1"]}),
        ("nack/", {"delivery_ids": ["1-1-0-0-1"]}),
    ):
        answer = api.post(URL + "shop/nobody/" + path, body, format="json")
        assert (answer.status_code, answer.json()) == (404, detail.json()), path


def test_the_hot_path_finds_the_same_group_and_positions_as_the_plain_lookup(api, stream, clock):
    """`group_and_slots` (one prepared query) against the group and `slots` the ORM gives: every
    field of the group, subscriptions, streams, scopes and positions, in the same order."""
    other = factories.make_stream("first", scope="alpha", segment_count=3)
    create(api, streams=["shop/orders", "alpha/first"], sinks=["a", "b"])
    read(api, 5)
    assert api.post(G + "checkpoints/", {"name": "cp"}, format="json").status_code == 201  # cuts (JSON) published
    group = ReaderGroup.objects.select_related("scope").get(scope__name="shop", name="billing")
    plain = consuming.slots(group)
    found, fast = consuming.group_and_slots("shop", "billing")

    def fields(obj):
        return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}

    assert fields(found) == fields(group) and fields(found.scope) == fields(group.scope)
    assert found.sinks == ["a", "b"] and fast[-1].subscription.acknowledgement_cut == {"0": 0, "1": 0}
    assert [(s.stream.full_name, s.segment) for s in fast] == [(s.stream.full_name, s.segment) for s in plain]
    assert [s.stream.full_name for s in fast][:3] == ["alpha/first"] * 3 and other.segment_count == 3
    for a, b in zip(fast, plain, strict=True):
        assert fields(a.position) == fields(b.position)
        assert fields(a.subscription) == fields(b.subscription)
        assert fields(a.stream) == fields(b.stream) and fields(a.stream.scope) == fields(b.stream.scope)
        assert a.subscription.reader_group is found and a.tracker.keys == b.tracker.keys
    assert consuming.group_and_slots("shop", "nobody") is None


def test_floors_persisted_in_one_statement_only_move_forward_and_missed_adds_up(api, stream, clock):
    create(api)
    first, second = consuming.slots(ReaderGroup.objects.get(name="billing"))
    persist_floors([(first, 7, 2), (second, 3, 0), (first, 5, 1)])
    assert {p.segment_id: (p.floor, p.missed) for p in ReadPosition.objects.all()} == {"0": (7, 3), "1": (3, 0)}
    stale_first, stale_second = consuming.slots(ReaderGroup.objects.get(name="billing"))
    stale_first.position.floor = 0  # a stale copy: the row, not the copy, decides
    persist_floors([(stale_first, 4, 0), (stale_second, 9, 0)])
    assert {p.segment_id: (p.floor, p.missed) for p in ReadPosition.objects.all()} == {"0": (7, 3), "1": (9, 0)}


def test_an_ack_of_a_live_delivery_spelled_otherwise_is_refused_and_acks_nothing(api, stream, clock):
    # given a live delivery, its id written with a zero-padded epoch or offset, or Arabic-Indic digits
    create(api)
    (d,) = read(api, 1)["deliveries"]
    prefix, offset, epoch = d["delivery_id"].rsplit("-", 2)
    arabic = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
    for spelled in [
        f"{prefix}-{offset}-0{epoch}",
        f"{prefix}-0{offset}-{epoch}",
        f"{prefix}-{offset}-{epoch.translate(arabic)}",
    ]:
        # when it is acknowledged so
        response = api.post(G + "ack/", {"delivery_ids": [spelled]}, format="json")

        # then it is refused, naming it, and the delivery is still pending
        assert response.status_code == 400, spelled
        assert (response.json()["code"], response.json()["field"]) == ("unknown_delivery", "delivery_ids[0]")
    assert set(floors(api).values()) == {0}
    assert api.post(G + "ack/", {"delivery_ids": [d["delivery_id"]]}, format="json").json()["acked"] == 1
