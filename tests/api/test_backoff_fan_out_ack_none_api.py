"""Over REST: redelivery backoff (JetStream's BackOff), fan-out that remembers which sinks
acknowledged across redeliveries and lets one sink give an event back, and at-most-once groups
(`ack_policy: none`), each with its bad input refused naming the field."""

import factories
import pytest

from domain.events import EventIn
from streams import services

pytestmark = pytest.mark.django_db
URL = "/api/v1/reader-groups/"
G = URL + "shop/billing/"


@pytest.fixture
def stream():
    """Four events on one segment."""
    stream = factories.make_stream()
    services.do_publish(stream, [EventIn(f"e{i}".encode()) for i in range(4)])
    return stream


def create(api, **body):
    return factories.create_group_over_api(api, **{"retention_type": "MANUAL_RELEASE_AT_USER_STREAMCUT", **body})


def read(api, n=10):
    answer = api.post(G + "read/", {"max_events": n}, format="json")
    assert answer.status_code == 200, answer.content
    return answer.json()["deliveries"]


def post(api, verb, body):
    return api.post(G + verb + "/", body, format="json")


def test_an_expired_lease_and_a_plain_nack_wait_the_backoff(api, stream, clock):
    group = create(api, ack_timeout_s=10, backoff_s=[5, 60])
    assert group["backoff_s"] == [5.0, 60.0] and group["ack_policy"] == "explicit"
    first = read(api, 2)
    assert [d["offset"] for d in first] == [0, 1]
    # e1 is given back without a delay: its first redelivery waits 5 s
    assert post(api, "nack", {"delivery_ids": [first[1]["delivery_id"]]}).json()["given_back"] == 1
    clock.now += 4
    assert [d["offset"] for d in read(api)] == [2, 3]  # not e1 yet
    clock.now += 1
    (again,) = read(api)
    assert (again["offset"], again["delivery_count"]) == (1, 2)
    # e0's lease expires at 10 s: 5 s more; e1's second lease expires at 15 s: 60 s more
    clock.now += 10 - 5 + 0.5  # 10.5 s
    assert read(api) == []
    clock.now += 5  # 15.5 s: e0 (due at 15), and e2, e3 (leased at 4 s, expired at 14 s, due at 19)
    assert [(d["offset"], d["delivery_count"]) for d in read(api)] == [(0, 2)]
    clock.now += 4
    assert sorted((d["offset"], d["delivery_count"]) for d in read(api)) == [(2, 2), (3, 2)]
    clock.now += 60
    assert [(d["offset"], d["delivery_count"]) for d in read(api)] == [(1, 3)]


def test_a_nack_with_its_own_delay_ignores_the_backoff(api, stream, clock):
    create(api, backoff_s=[600])
    (d,) = read(api, 1)
    assert post(api, "nack", {"delivery_ids": [d["delivery_id"]], "delay_ms": 0}).json()["given_back"] == 1
    assert [x["offset"] for x in read(api, 1)] == [0]


def test_a_fan_out_redelivery_is_for_the_sinks_that_have_not_acknowledged(api, stream, clock):
    create(api, sinks=["archive", "search"], ack_timeout_s=10)
    first = read(api, 2)
    assert [d["sinks_pending"] for d in first] == [["archive", "search"]] * 2
    assert post(api, "ack", {"delivery_ids": [first[0]["delivery_id"]], "sink": "archive"}).json() == {
        "acked": 0,
        "waiting_for_sinks": 1,
        "given_back": 0,
    }
    # search gives e0 back on its own, e1's lease expires: both come again
    given = post(api, "nack", {"delivery_ids": [first[0]["delivery_id"]], "sink": "search"})
    assert given.status_code == 200 and given.json()["given_back"] == 1
    clock.now += 11
    again = {d["offset"]: d for d in read(api, 2)}
    assert again[0]["sinks_pending"] == ["search"]  # archive's acknowledgement was remembered
    assert again[1]["sinks_pending"] == ["archive", "search"]
    # search alone completes e0
    done = post(api, "ack", {"delivery_ids": [again[0]["delivery_id"]], "sink": "search"})
    assert done.json()["acked"] == 1
    positions = api.get(G).json()["positions"]
    assert positions[0]["floor"] == 1


def test_an_at_most_once_group_processes_deliveries_as_it_hands_them_out(api, stream, clock):
    group = create(api, ack_policy="none")
    assert group["ack_policy"] == "none"
    got = read(api, 3)
    assert [d["offset"] for d in got] == [0, 1, 2] and {d["lease_expires_at"] for d in got} == {None}
    assert api.get(G).json()["positions"][0]["floor"] == 3  # processed, and persisted
    clock.now += 3600
    assert [d["offset"] for d in read(api)] == [3]  # nothing comes again
    acked = post(api, "ack", {"delivery_ids": [got[0]["delivery_id"]]})
    assert acked.status_code == 200 and acked.json()["acked"] == 0  # nothing left to acknowledge
    refused = post(api, "nack", {"delivery_ids": [got[0]["delivery_id"]]})
    assert refused.status_code == 409 and refused.json()["code"] == "ack_policy_none"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"backoff_s": []}, "backoff_s"),
        ({"backoff_s": [1, -1]}, "backoff_s[1]"),
        ({"backoff_s": [1, "5"]}, "backoff_s[1]"),
        ({"backoff_s": [1, True]}, "backoff_s[1]"),
        ({"backoff_s": [1, 10**9]}, "backoff_s[1]"),
        ({"backoff_s": 5}, "backoff_s"),
        ({"backoff_s": [1, 2, 3], "max_deliveries": 2}, "backoff_s"),
        ({"ack_policy": "sometimes"}, "ack_policy"),
    ],
)
def test_bad_backoff_or_ack_policy_is_refused_naming_the_field(api, stream, body, field):
    answer = api.post(URL, {"scope": "shop", "name": "billing", "streams": ["shop/orders"], **body}, format="json")
    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == field
    assert api.get(G).status_code == 404  # nothing made


def test_an_update_keeps_the_backoff_within_max_deliveries(api, stream):
    create(api, backoff_s=[1, 2, 3])
    lowered = api.patch(G, {"max_deliveries": 2}, format="json")
    assert lowered.status_code == 400 and lowered.json()["field"] == "max_deliveries"
    both = api.patch(G, {"max_deliveries": 2, "backoff_s": [1, 2]}, format="json")
    assert both.status_code == 200 and both.json()["backoff_s"] == [1.0, 2.0]
    cleared = api.patch(G, {"backoff_s": None}, format="json")
    assert cleared.status_code == 200 and cleared.json()["backoff_s"] == []


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"sink": "nope"}, 400, "sink"),
        ({"sink": 3}, 400, "sink"),
    ],
)
def test_a_sink_nack_names_one_of_the_groups_sinks(api, stream, body, status, field):
    create(api, sinks=["archive"])
    (d,) = read(api, 1)
    answer = post(api, "nack", {"delivery_ids": [d["delivery_id"]], **body})
    assert answer.status_code == status and answer.json()["field"] == field


def test_a_live_group_switched_from_none_to_explicit_leases_from_then_on_and_keeps_what_it_processed(
    api, stream, clock
):
    """`ack_policy` none → explicit on a group that has read: what it handed out before stays
    processed (never delivered again, its floor kept); what it hands out after is leased, comes
    again when its lease expires, can be given back, and is processed only once acknowledged."""
    create(api, ack_policy="none", ack_timeout_s=10)
    assert [d["offset"] for d in read(api, 2)] == [0, 1]
    changed = api.patch(G, {"ack_policy": "explicit"}, format="json")
    assert changed.status_code == 200 and changed.json()["ack_policy"] == "explicit"
    (leased,) = read(api, 1)
    assert leased["offset"] == 2 and leased["lease_expires_at"] is not None
    clock.now += 11  # not acknowledged: its lease expires and it comes again, never 0 or 1
    (again,) = read(api, 1)
    assert (again["offset"], again["delivery_count"]) == (2, 2)
    assert api.get(G).json()["positions"][0]["floor"] == 2  # held at the unacknowledged event
    assert post(api, "nack", {"delivery_ids": [again["delivery_id"]]}).json()["given_back"] == 1
    (third,) = read(api, 1)
    assert (third["offset"], third["delivery_count"]) == (2, 3)
    assert post(api, "ack", {"delivery_ids": [third["delivery_id"]]}).json()["acked"] == 1
    assert [d["offset"] for d in read(api)] == [3]
    assert api.get(G).json()["positions"][0]["floor"] == 3
