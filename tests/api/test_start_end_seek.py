"""Reader groups that start, stop and move (docs/api.md): `start` as head, tail, a time or
stream cuts; `end_stream_cuts` (a bounded group says when it has read everything up to them);
`seek` to head, tail, a time or cuts, which moves the generation on, drops live leases and moves
a subscriber's acknowledgement cut; with competing consumers; bad input refused naming the field,
nothing applied."""

import time
from datetime import UTC, datetime, timedelta

import factories
import pytest

from domain.events import EventIn
from groups.models import Subscription
from retention.services import do_truncate
from streams import services

pytestmark = pytest.mark.django_db
URL = "/api/v1/reader-groups/"
G = URL + "shop/billing/"


@pytest.fixture
def stream():
    """shop/orders: two segments, events a0..a4 on each, then (a few ms later) b0..b4 on each;
    `stream.between` is a time after every a and before every b."""
    stream = factories.make_stream(segment_count=2)
    keys = {s: factories.routing_key_for(stream, s) for s in ("0", "1")}
    for seg, key in keys.items():
        services.do_publish(stream, [EventIn(f"a{i}-{seg}".encode(), routing_key=key) for i in range(5)])
    time.sleep(0.005)
    stream.between = datetime.now(UTC)
    time.sleep(0.005)
    for seg, key in keys.items():
        services.do_publish(stream, [EventIn(f"b{i}-{seg}".encode(), routing_key=key) for i in range(5)])
    return stream


def create(api, expect=201, **body):
    answer = api.post(
        URL,
        {
            "scope": "shop",
            "name": "billing",
            "streams": ["shop/orders"],
            "retention_type": "MANUAL_RELEASE_AT_USER_STREAMCUT",
            **body,
        },
        format="json",
    )
    assert answer.status_code == expect, answer.content
    return answer.json()


def read(api, n=100, consumer="c1"):
    answer = api.post(G + "read/", {"max_events": n, "consumer": consumer}, format="json")
    assert answer.status_code == 200, answer.content
    return answer.json()["deliveries"]


def payloads(deliveries):
    return sorted(d["payload"] for d in deliveries)


def ack(api, deliveries):
    answer = api.post(G + "ack/", {"delivery_ids": [d["delivery_id"] for d in deliveries]}, format="json")
    return answer


def seek(api, expect=200, **body):
    answer = api.post(G + "seek/", body, format="json")
    assert answer.status_code == expect, answer.content
    return answer.json()


def ack_cut():
    return Subscription.objects.get(reader_group__name="billing").acknowledgement_cut


ALL_B = sorted(f"b{i}-{s}" for i in range(5) for s in "01")


def test_a_group_starts_at_the_tail_and_reads_only_what_comes_next(api, stream):
    group = create(api, start="tail")
    assert group["start"] == "tail" and ack_cut() == {"0": 10, "1": 10}
    assert read(api) == []
    services.do_publish(stream, [EventIn(b"new", routing_key=factories.routing_key_for(stream, "0"))])
    assert payloads(read(api)) == ["new"]


def test_a_group_starts_at_a_time_with_the_first_events_published_then(api, stream):
    at = stream.between.isoformat().replace("+00:00", "Z")
    group = create(api, start={"time": at})
    assert group["start"] == {"time": at}
    assert ack_cut() == {"0": 5, "1": 5}  # a subscriber holds from there
    assert payloads(read(api)) == ALL_B


def test_a_group_starts_at_given_cuts(api, stream):
    create(api, start={"stream_cuts": {"shop/orders": {"0": 8, "1": 3}}})
    assert ack_cut() == {"0": 8, "1": 3}
    assert payloads(read(api)) == sorted(["b3-0", "b4-0", "a3-1", "a4-1", *[f"b{i}-1" for i in range(5)]])


def test_a_bounded_group_stops_at_its_end_and_says_when_it_has_finished(api, stream):
    group = create(api, end_stream_cuts={"shop/orders": {"0": 5, "1": 7}})
    assert group["end_stream_cuts"] == {"shop/orders": {"0": 5, "1": 7}} and group["finished"] is False
    # two competing consumers share the bounded range: nothing past the end, nothing twice
    first, second = read(api, 6, "c1"), read(api, 100, "c2")
    got = first + second
    assert len({d["delivery_id"] for d in got}) == len(got) == 12
    assert payloads(got) == sorted([f"a{i}-0" for i in range(5)] + [f"a{i}-1" for i in range(5)] + ["b0-1", "b1-1"])
    assert read(api) == [] and read(api, consumer="c2") == []
    assert ack(api, first).status_code == 200
    assert api.get(G).json()["finished"] is False  # c2's are not acknowledged yet
    assert ack(api, second).status_code == 200
    assert api.get(G).json()["finished"] is True


def missed(api):
    return {p["segment"]: p["missed"] for p in api.get(G).json()["positions"]}


def test_a_bounded_group_counts_as_missed_only_what_it_would_have_read(api, stream, admin_user):
    # given: a bounded group that finished segment 0 (end 5) and read nothing of segment 1 (end 7)
    create(api, end_stream_cuts={"shop/orders": {"0": 5, "1": 7}}, retention_type="NONE")
    done = [d for d in read(api, 100) if d["segment"] == "0"]
    assert ack(api, done).status_code == 200

    # when: retention deletes far past both ends
    do_truncate(stream, {"0": 9, "1": 9}, rule="manual", trigger="api", user=admin_user)
    after = api.post(G + "read/", {"max_events": 100}, format="json").json()

    # then: nothing past an end counts: segment 0 missed nothing, segment 1 the 7 events it did
    # not process before its end (of 9 deleted), and the group has finished
    assert after["deliveries"] == [] and after["missed"] == 7
    assert missed(api) == {"0": 0, "1": 7}
    assert api.get(G).json()["finished"] is True
    # and later reads count nothing more
    assert api.post(G + "read/", {"max_events": 100}, format="json").json()["missed"] == 0
    assert missed(api) == {"0": 0, "1": 7}


def test_a_seek_back_to_a_time_drops_live_leases_moves_the_generation_and_the_cut(api, stream):
    create(api)
    handed = read(api)
    done = [d for d in handed if d["payload"].startswith("a")]
    assert ack(api, done).status_code == 200
    api.post(G + "truncation-cut/", {"stream": "shop/orders", "stream_cut": {"0": 10, "1": 10}}, format="json")
    assert ack_cut() == {"0": 10, "1": 10}

    detail = seek(api, time=stream.between.isoformat(), generation=0)

    assert detail["generation"] == 1
    assert ack_cut() == {"0": 5, "1": 5}  # backwards: it holds what it will read again
    assert [(p["segment"], p["floor"], p["pending"]) for p in detail["positions"]] == [("0", 5, 0), ("1", 5, 0)]
    stale = ack(api, [d for d in handed if d["payload"].startswith("b")])
    assert stale.status_code == 400 and stale.json()["code"] == "unknown_delivery"  # their leases went
    again = read(api, 100, "c2")
    assert payloads(again) == ALL_B and {d["delivery_count"] for d in again} == {1}


def test_a_seek_to_head_or_tail_or_cuts_with_competing_consumers(api, stream):
    create(api, retention_type="NONE")
    read(api, 4, "c1")
    assert seek(api, position="tail")["generation"] == 1
    assert read(api, 100, "c1") == [] and read(api, 100, "c2") == []
    seek(api, stream_cuts={"shop/orders": {"0": 9, "1": 0}})
    one, two = read(api, 3, "c1"), read(api, 100, "c2")
    assert len({(d["segment"], d["offset"]) for d in one + two}) == len(one + two) == 11
    seek(api, position="head")
    assert len(read(api)) == 20


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({}, 400, "invalid", "position"),
        ({"position": "head", "time": "2026-01-01T00:00:00Z"}, 400, "invalid", "time"),
        ({"position": "middle"}, 400, "invalid", "position"),
        ({"time": "2999-01-01T00:00:00Z"}, 400, "invalid", "time"),
        ({"time": "0000-01-01T00:00:00Z"}, 400, "invalid", "time"),
        ({"time": "2026-01-01T00:00:00"}, 400, "invalid", "time"),
        ({"time": 1700000000}, 400, "invalid", "time"),
        ({"stream_cuts": {"shop/orders": {"0": 1}}}, 400, "stream_cut_not_valid", "stream_cuts.shop/orders"),
        ({"stream_cuts": {"shop/orders": {"0": 1, "1": 11}}}, 400, "stream_cut_not_valid", "stream_cuts.shop/orders.1"),
        ({"stream_cuts": {"shop/other": {"0": 0}}}, 404, "subscriber_not_found", "stream_cuts.shop/other"),
        ({"stream_cuts": {}}, 400, "invalid", "stream_cuts"),
        ({"position": "head", "generation": 5}, 409, "generation_mismatch", "generation"),
        ({"position": "head", "to": "x"}, 400, "invalid", "to"),
    ],
)
def test_a_bad_seek_names_its_field_and_moves_nothing(api, stream, body, status, code, field):
    factories.make_stream("other")
    create(api)
    handed = read(api, 2)
    answer = api.post(G + "seek/", body, format="json")
    assert answer.status_code == status, answer.content
    assert (answer.json()["code"], answer.json()["field"]) == (code, field)
    assert api.get(G).json()["generation"] == 0 and ack_cut() == {"0": 0, "1": 0}
    assert ack(api, handed).json()["acked"] == 2  # the leases live on


def test_a_seek_cut_behind_the_head_is_refused(api, admin_user, stream):
    create(api, retention_type="NONE")
    do_truncate(stream, {"0": 4, "1": 4}, rule="manual", trigger="api", user=admin_user)
    answer = api.post(G + "seek/", {"stream_cuts": {"shop/orders": {"0": 2, "1": 6}}}, format="json")
    assert answer.status_code == 400 and answer.json()["field"] == "stream_cuts.shop/orders.0"
    assert "before the head" in answer.json()["message"]
    assert seek(api, position="head")["positions"][0]["floor"] == 4


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"start": "middle"}, "start"),
        ({"start": {"time": "2999-01-01T00:00:00Z"}}, "start.time"),
        ({"start": {"time": "yesterday"}}, "start.time"),
        ({"start": {"stream_cuts": {"shop/orders": {"0": 1, "1": 99}}}}, "start.stream_cuts.shop/orders.1"),
        ({"start": {"stream_cuts": {"shop/other": {"0": 0}}}}, "start.stream_cuts.shop/other"),
        ({"start": {"time": "2026-01-01T00:00:00Z", "x": 1}}, "start"),
        ({"end_stream_cuts": {"shop/orders": {"0": 3}}}, "end_stream_cuts.shop/orders"),
        ({"end_stream_cuts": {"shop/orders": {"0": 3, "1": 3}}, "start": "tail"}, "end_stream_cuts.shop/orders.0"),
        (
            {
                "end_stream_cuts": {"shop/orders": {"0": 3, "1": 3}},
                "start": {"stream_cuts": {"shop/orders": {"0": 2, "1": 4}}},
            },
            "end_stream_cuts.shop/orders.1",
        ),
        ({"end_stream_cuts": ["shop/orders"]}, "end_stream_cuts"),
    ],
)
def test_a_bad_start_or_end_names_its_field_and_makes_no_group(api, stream, body, field):
    factories.make_stream("other")
    answer = create(api, expect=answer_status(body), **body)
    assert answer["field"] == field
    assert api.get(G).status_code == 404


def answer_status(body) -> int:
    return 404 if "shop/other" in str(body) else 400


def test_a_seek_by_time_before_every_event_is_the_head_and_one_after_is_the_tail(api, stream):
    create(api, retention_type="NONE")
    old = (stream.between - timedelta(days=365)).isoformat()
    assert [p["floor"] for p in seek(api, time=old)["positions"]] == [0, 0]
    assert [p["floor"] for p in seek(api, time=datetime.now(UTC).isoformat())["positions"]] == [10, 10]
