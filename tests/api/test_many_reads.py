"""Many reads in one request (`POST /api/v1/reads/`, docs/api.md): each read answered as its lone
request would be, one line each; what one read is refused is its line alone; a body that is not a
list of reads is refused whole, with nothing read. Here through Django's test client (the answer
waits in its thread); tests/integration/test_waiting_reads.py holds the same under the real web
server, which waits without one."""

import json
import threading
import time

import factories
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from streams import services

pytestmark = pytest.mark.django_db

READS = "/api/v1/reads/"
KEYS = "/api/v1/api-keys/"


@pytest.fixture
def shop():
    """shop/orders with three events, read by shop/billing and shop/audit from its head."""
    orders = factories.make_stream()
    factories.publish(orders, 3, b"e")
    factories.make_group(orders, start="head")
    factories.make_group(orders, name="audit", start="head")
    return orders


def lines(response) -> list[dict]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/x-ndjson"
    return [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]


def many(client, *reads: dict) -> dict[int, dict]:
    """Many reads in one request, each read's line by its place."""
    return by_read(lines(client.post(READS, {"reads": list(reads)}, format="json")))


def by_read(answered: list[dict]) -> dict[int, dict]:
    found = {line["read"]: line for line in answered}
    assert len(found) == len(answered), "each read answered once"
    return found


def offsets(answer: dict) -> list[int]:
    return [d["offset"] for d in answer["deliveries"]]


def test_each_read_is_answered_as_its_lone_request_would_be(api, shop):
    answered = many(
        api,
        {"reader_group": "shop/billing", "max_events": 2, "consumer": "a"},
        {"reader_group": "shop/audit", "max_events": 10},
        {"reader_group": "shop/billing", "max_events": 10, "consumer": "b"},
    )
    assert sorted(answered) == [0, 1, 2]
    assert all(line["status"] == 200 for line in answered.values())
    # competing consumers of one group get different events; the other group gets all of them
    assert offsets(answered[0]["answer"]) == [0, 1] and offsets(answered[2]["answer"]) == [2]
    assert offsets(answered[1]["answer"]) == [0, 1, 2]
    lone = api.post("/api/v1/reader-groups/shop/audit/read/", {"max_events": 10}, format="json").json()
    assert lone["deliveries"] == [] and set(lone) == set(answered[1]["answer"])


def test_a_read_its_group_refuses_is_its_own_line_and_the_others_go_on(api, shop):
    answered = many(
        api, {"reader_group": "shop/nobody", "max_events": 1}, {"reader_group": "shop/billing", "max_events": 5}
    )
    alone = api.post("/api/v1/reader-groups/shop/nobody/read/", {"max_events": 1}, format="json")
    assert (answered[0]["status"], answered[0]["answer"]) == (404, alone.json())
    assert answered[1]["status"] == 200 and offsets(answered[1]["answer"]) == [0, 1, 2]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([{"reader_group": "shop/billing", "max_events": 1}], "reads"),
        ({}, "reads"),
        ({"reads": []}, "reads"),
        ({"reads": {"reader_group": "shop/billing"}}, "reads"),
        ({"reads": [{"reader_group": "shop/billing", "max_events": 1}, "shop/audit"]}, "reads[1]"),
        ({"reads": [{"reader_group": "shop/billing", "max_events": 1}], "wait_ms": 5}, "wait_ms"),
        ({"reads": [{"reader_group": "shop/billing", "max_events": 1}] * 3}, "reads"),
        (
            {"reads": [{"reader_group": "shop/audit", "max_events": 1}, {"reader_group": "shop/billing"}]},
            "reads[1].max_events",
        ),
        ({"reads": [{"reader_group": "shop/billing", "max_events": 0}]}, "reads[0].max_events"),
        ({"reads": [{"reader_group": "shop/billing/read", "max_events": 1}]}, "reads[0].reader_group"),
        ({"reads": [{"max_events": 1}]}, "reads[0].reader_group"),
        ({"reads": [{"reader_group": "shop/audit", "max_events": 1, "colour": "red"}]}, "reads[0].colour"),
        ({"reads": [{"reader_group": "shop/audit", "max_events": 1, "wait_ms": -1}]}, "reads[0].wait_ms"),
        (
            {"reads": [{"reader_group": "shop/audit", "max_events": 1, "ack": {"delivery_ids": ["x"], "colour": 1}}]},
            "reads[0].ack.colour",
        ),
        (
            {"reads": [{"reader_group": "shop/audit", "max_events": 1, "ack": {"delivery_ids": [7]}}]},
            "reads[0].ack.delivery_ids",
        ),
        ({"reads": [{"reader_group": "shop/audit", "max_events": 1, "ack": ["x"]}]}, "reads[0].ack"),
    ],
)
def test_a_body_that_is_not_a_list_of_reads_is_refused_whole_and_nothing_is_read(api, shop, settings, body, field):
    settings.CBR_MAX_READS_PER_REQUEST = 2
    response = api.post(READS, body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    for group in ("billing", "audit"):  # nothing was read
        lone = api.post(f"/api/v1/reader-groups/shop/{group}/read/", {"max_events": 10}, format="json").json()
        assert offsets(lone) == [0, 1, 2]


def test_an_unknown_format_is_refused_naming_it(api, shop):
    response = api.post(
        READS + "?format=AAA", {"reads": [{"reader_group": "shop/billing", "max_events": 1}]}, format="json"
    )
    assert response.status_code == 400 and response.json()["field"] == "format"


def test_each_read_is_checked_against_who_may_consume_from_its_group(operator_api, shop):
    made = operator_api.post(
        KEYS, {"name": "billing-worker", "kind": "reader_group", "reader_group": "shop/billing"}, format="json"
    )
    keyed = APIClient()
    keyed.credentials(HTTP_AUTHORIZATION=f"Api-Key {made.json()['key']}")
    answered = many(
        keyed, {"reader_group": "shop/audit", "max_events": 5}, {"reader_group": "shop/billing", "max_events": 5}
    )
    assert answered[0]["status"] == 403 and offsets(answered[1]["answer"]) == [0, 1, 2]
    assert (
        APIClient()
        .post(READS, {"reads": [{"reader_group": "shop/billing", "max_events": 1}]}, format="json")
        .status_code
        == 401
    )


def test_a_read_past_the_room_to_wait_is_refused_with_when_to_retry(api, shop, settings):
    settings.CBR_MAX_WAITING_READS = 1
    answered = many(
        api,
        {"reader_group": "shop/billing", "max_events": 5, "wait_ms": 100},
        {"reader_group": "shop/audit", "max_events": 5, "wait_ms": 100},
        {"reader_group": "shop/audit", "max_events": 5},
    )
    assert answered[0]["status"] == 200 and offsets(answered[0]["answer"]) == [0, 1, 2]
    assert answered[1]["status"] == 503 and answered[1]["answer"]["code"] == "too_many_waiting_reads"
    assert answered[1]["retry_after"] >= 1
    assert answered[2]["status"] == 200 and offsets(answered[2]["answer"]) == [0, 1, 2]


@pytest.mark.django_db(transaction=True)
def test_reads_that_wait_are_answered_when_woken_and_the_others_when_their_wait_ends(api):
    orders = factories.make_stream()
    factories.make_group(orders, start="tail")
    factories.make_group(orders, name="audit", start="tail")
    publisher = threading.Timer(0.5, lambda: services.do_publish(orders, [factories.EventIn(b"late")]))
    started = time.monotonic()
    publisher.start()
    try:
        response = api.post(
            READS,
            {
                "reads": [
                    {"reader_group": "shop/billing", "max_events": 5, "wait_ms": 30_000, "consumer": "a"},
                    {"reader_group": "shop/billing", "max_events": 5, "wait_ms": 1_500, "consumer": "b"},
                    {"reader_group": "shop/audit", "max_events": 5, "wait_ms": 30_000},
                    {"reader_group": "shop/audit", "max_events": 5},
                ]
            },
            format="json",
        )
        answered = lines(response)
    finally:
        publisher.join()
    took = time.monotonic() - started
    order = [line["read"] for line in answered]
    assert order[0] == 3 and answered[0]["answer"]["deliveries"] == []  # no wait: answered first
    found = by_read(answered)
    # one consumer of billing gets the event, the other's wait runs out empty; audit's wakes
    payloads = {n: [d["payload"] for d in found[n]["answer"]["deliveries"]] for n in found}
    assert payloads[2] == ["late"]
    assert sorted([payloads[0], payloads[1]]) == [[], ["late"]]
    assert took < 25, "the waiting reads were woken, not timed out"


def test_a_refusal_is_json_whatever_the_client_accepts(api, shop):
    response = api.post(READS, {"reads": []}, format="json", HTTP_ACCEPT="application/x-ndjson")
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert response.json()["field"] == "reads"


def test_a_group_named_by_many_reads_is_looked_up_once(api, shop):
    """Ten thousand reads of one group (a fuzzer's, or a client's of many consumers) cost one
    lookup of it, found or not, not one each."""
    reads = [{"reader_group": "shop/nobody", "max_events": 1}] * 300 + [
        {"reader_group": "shop/billing", "max_events": 1}
    ] * 3
    with CaptureQueriesContext(connection) as queries:
        answered = many(api, *reads)
    assert [answered[n]["status"] for n in range(300)] == [404] * 300
    assert len({json.dumps(answered[n]["answer"]) for n in range(300)}) == 1  # each the lone read's 404
    assert sum(answered[n]["status"] == 200 for n in range(300, 303)) == 3
    assert sum("reader_group" in q["sql"] or "readergroup" in q["sql"] for q in queries.captured_queries) < 20
