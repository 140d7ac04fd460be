"""The lane (`api.lane`) answers a publish, a read and an ack exactly as Django does (status,
headers, body), and leaves every other request to Django before doing anything. Each request is
answered both ways, against the real store and Redis: through Django's whole stack (the test
client: every middleware, DRF's dispatch) and through the lane."""

from __future__ import annotations

import re

import factories
import orjson
import pytest
from django.test import Client, RequestFactory

from api import lane
from api.parking import PARK
from domain.events import EventIn
from streams import services
from streams.wire import READ_BATCH_MEDIA_TYPE

pytestmark = pytest.mark.django_db

LEFT, RIGHT = "/api/v1/streams/shop/left/events/", "/api/v1/streams/shop/right/events/"


@pytest.fixture
def token(admin_user):
    return factories.token_for(admin_user)


@pytest.fixture
def streams():
    return factories.make_stream("left"), factories.make_stream("right")


def by_django(path: str, body: bytes, **headers: str):
    """Django's answer: (status, headers, body)."""
    response = Client().generic("POST", path, body, **_headers(headers))
    return response.status_code, dict(response.items()), response.content


def by_lane(path: str, body: bytes, query: str = "", **headers: str):
    """The lane's answer, as Django's above, or None (left to Django)."""
    request = RequestFactory().generic("POST", path + (f"?{query}" if query else ""), body, **_headers(headers))
    response = lane.answer(request.environ, body)
    if response is None:
        return None
    return response.status_code, dict(response.items()), response.content


def _headers(headers: dict) -> dict:
    out = {"content_type": headers.pop("content_type", "application/json")}
    out.update({"HTTP_" + name.upper(): value for name, value in headers.items()})
    return out


def both(path: str, body: dict | bytes, token: str, **headers: str):
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    auth = {"authorization": f"Token {token}", **headers}
    return by_lane(path, raw, **auth), by_django(path, raw, **auth)


def test_a_publish_is_answered_as_django_answers_it(token, streams):
    events = {"events": [{"payload": "a", "routing_key": "k"}, {"payload_b64": "Yg==", "headers": {"t": "1"}}]}
    lane_answer = by_lane(LEFT, orjson.dumps(events), authorization=f"Token {token}")
    django_answer = by_django(RIGHT, orjson.dumps(events), authorization=f"Token {token}")
    assert lane_answer is not None
    assert lane_answer == django_answer  # both streams empty before: the same positions
    assert lane_answer[0] == 201 and orjson.loads(lane_answer[2]) == {
        "positions": [{"segment": "0", "offset": 0}, {"segment": "0", "offset": 1}]
    }
    assert lane_answer[1]["X-Frame-Options"] == "DENY" and lane_answer[1]["Allow"] == "GET, POST, HEAD, OPTIONS"
    assert [e["payload"] for e in Client().get(LEFT, HTTP_AUTHORIZATION=f"Token {token}").json()["events"]] == [
        "a",
        "b",
    ]


@pytest.mark.parametrize(
    "body",
    [
        {"events": []},
        {"events": [{"payload": "a", "payload_b64": "Yg=="}]},
        {"events": [{"payload": "a", "colour": "red"}]},
        {"evnts": [{"payload": "a"}]},
        [1, 2],
        None,
        {"events": [{"payload": "a", "delay_ms": -5}]},
    ],
    ids=["empty", "two-payloads", "unknown-field", "misspelt", "a-list", "null", "negative-delay"],
)
def test_a_refused_publish_is_refused_as_django_refuses_it_and_writes_nothing(token, streams, body):
    lane_answer, django_answer = both(LEFT, body, token)
    assert lane_answer == django_answer
    assert 400 <= lane_answer[0] < 500 and "field" in orjson.loads(lane_answer[2])
    assert Client().get(LEFT, HTTP_AUTHORIZATION=f"Token {token}").json()["events"] == []


def test_a_publish_to_no_stream_is_a_404_naming_it(token, streams):
    lane_answer, django_answer = both("/api/v1/streams/shop/nowhere/events/", {"events": [{"payload": "a"}]}, token)
    assert lane_answer == django_answer and lane_answer[0] == 404
    assert b"shop/nowhere" in lane_answer[2]


def test_a_publish_to_a_stream_at_its_max_is_refused_as_by_django(token, streams):
    left = streams[0]
    left.full_since = left.created_at
    left.on_max_limit = "reject_publish"
    left.save()
    lane_answer, django_answer = both(LEFT, {"events": [{"payload": "a"}]}, token)
    assert lane_answer == django_answer and lane_answer[0] == 507


def _normalized(answer):
    """A read's answer with what differs between two groups' reads (ids, lease times) cut out."""
    status, headers, body = answer
    assert int(headers["Content-Length"]) == len(body)
    headers = {**headers, "Content-Length": "-"}  # each its own body's length
    text = re.sub(rb'"delivery_id":"[^"]*"', b'"delivery_id":"-"', body)
    text = re.sub(rb'"lease_expires_at":"[^"]*"', b'"lease_expires_at":"-"', text)
    return status, headers, text


@pytest.fixture
def two_groups(streams):
    left = streams[0]
    services.do_publish(left, [EventIn(f"e{i}".encode()) for i in range(6)])
    for name in ("one", "two"):
        factories.make_group(left, name=name, retention_type="AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT")
    return "/api/v1/reader-groups/shop/one/", "/api/v1/reader-groups/shop/two/"


def test_reads_and_acks_are_answered_as_django_answers_them(token, two_groups):
    one, two = two_groups
    auth = {"authorization": f"Token {token}"}
    body = orjson.dumps({"max_events": 3, "consumer": "c1"})
    lane_read, django_read = by_lane(one + "read/", body, **auth), by_django(two + "read/", body, **auth)
    assert lane_read is not None and _normalized(lane_read) == _normalized(django_read)
    assert [d["payload"] for d in orjson.loads(lane_read[2])["deliveries"]] == ["e0", "e1", "e2"]
    assert lane_read[1]["Vary"] == "Accept"

    # the next read carries the ack of the first: applied once, answered alike
    def carrying(answer):
        ids = [d["delivery_id"] for d in orjson.loads(answer[2])["deliveries"]]
        return orjson.dumps({"max_events": 3, "ack": {"delivery_ids": ids}})

    lane_next = by_lane(one + "read/", carrying(lane_read), **auth)
    django_next = by_django(two + "read/", carrying(django_read), **auth)
    assert _normalized(lane_next) == _normalized(django_next)
    assert orjson.loads(lane_next[2])["ack"] == {"acked": 3, "waiting_for_sinks": 0, "given_back": 0, "refused": []}

    # an ack of its own, and an ack of what was never handed out
    for ack in (
        {"delivery_ids": [d["delivery_id"] for d in orjson.loads(lane_next[2])["deliveries"]][:1]},
        {"delivery_ids": ["nonsense"]},
    ):
        lane_ack, django_ack = (
            by_lane(one + "ack/", orjson.dumps(ack), **auth),
            by_django(two + "ack/", orjson.dumps(ack), **auth),
        )
        if ack["delivery_ids"] != ["nonsense"]:  # each group's own ids: the same answer
            django_ack = by_django(
                two + "ack/",
                orjson.dumps(
                    {"delivery_ids": [d["delivery_id"] for d in orjson.loads(django_next[2])["deliveries"]][:1]}
                ),
                **auth,
            )
        assert lane_ack == django_ack
    assert lane_ack[0] == 400 and orjson.loads(lane_ack[2])["field"].startswith("delivery_ids")


def test_a_binary_read_and_a_refused_read_are_answered_as_by_django(token, two_groups):
    one, two = two_groups
    auth = {"authorization": f"Token {token}", "accept": READ_BATCH_MEDIA_TYPE}
    body = orjson.dumps({"max_events": 2})
    lane_read, django_read = by_lane(one + "read/", body, **auth), by_django(two + "read/", body, **auth)
    assert lane_read[0] == django_read[0] == 200
    # (the two groups' delivery ids may differ in length: the lengths are each its own body's)
    assert {**lane_read[1], "Content-Length": "-"} == {**django_read[1], "Content-Length": "-"}
    assert int(lane_read[1]["Content-Length"]) == len(lane_read[2])
    assert lane_read[1]["Content-Type"] == READ_BATCH_MEDIA_TYPE
    for bad in ({"max_events": 0}, {"max_events": 2, "wait_ms": -1}, {"max_events": 2, "colour": 1}):
        lane_bad, django_bad = (
            by_lane(one + "read/", orjson.dumps(bad), **auth),
            by_django(one + "read/", orjson.dumps(bad), **auth),
        )
        assert lane_bad == django_bad and lane_bad[0] == 400  # errors in JSON, whatever was accepted
        assert lane_bad[1]["Content-Type"] == "application/json"
    missing = "/api/v1/reader-groups/shop/nobody/read/"
    assert by_lane(missing, body, **auth) == by_django(missing, body, **auth)


def test_a_read_that_may_park_parks_with_the_middleware_headers(token, two_groups):
    one, _two = two_groups
    request = RequestFactory().generic(
        "POST",
        one + "read/",
        orjson.dumps({"max_events": 10}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token}",
    )
    lane.answer(request.environ, orjson.dumps({"max_events": 10}))  # the six events handed out
    request.environ[PARK] = True
    response = lane.answer(request.environ, orjson.dumps({"max_events": 10, "wait_ms": 5000}))
    assert type(response).__name__ == "_ParkedRead"
    assert response["X-Frame-Options"] == "DENY" and response["Vary"] == "Accept"


@pytest.mark.parametrize(
    "case",
    [
        "no-credential",
        "unknown-token",
        "viewer-publishes",
        "query-string",
        "text-body",
        "malformed-json",
        "html-only",
        "not-a-lane-route",
        "host-not-allowed",
    ],
)
def test_what_the_lane_does_not_answer_it_leaves_to_django_untouched(token, plain_user, streams, case, settings):
    body = orjson.dumps({"events": [{"payload": "a"}]})
    headers = {"authorization": f"Token {token}"}
    path, query = LEFT, ""
    if case == "no-credential":
        headers = {}
    elif case == "unknown-token":
        headers = {"authorization": "Token nope"}
    elif case == "viewer-publishes":
        headers = {"authorization": f"Token {factories.token_for(plain_user)}"}
    elif case == "query-string":
        query = "colour=red"
    elif case == "text-body":
        headers["content_type"] = "text/plain"
    elif case == "malformed-json":
        body = b'{"events": [{"payload": '
    elif case == "html-only":
        headers["accept"] = "text/html"
    elif case == "not-a-lane-route":
        path, body = "/api/v1/streams/", orjson.dumps({"scope": "shop", "name": "third"})
    elif case == "host-not-allowed":
        headers["host"] = "evil.example"
    assert by_lane(path, body, query, **dict(headers)) is None
    assert Client().get(LEFT, HTTP_AUTHORIZATION=f"Token {token}").json()["events"] == []  # nothing written
    status = by_django(path + (f"?{query}" if query else ""), body, **headers)[0]
    assert status in (400, 401, 403, 406, 415) or (case in ("query-string", "not-a-lane-route") and status == 201)


def test_a_refusal_is_logged_as_django_logs_it(token, streams, caplog):
    path = "/api/v1/streams/shop/nowhere/events/"
    body = orjson.dumps({"events": [{"payload": "a"}]})
    logged = []
    for answer in (by_lane, by_django):
        caplog.clear()
        with caplog.at_level("WARNING", logger="django.request"):
            answer(path, body, authorization=f"Token {token}")
        logged.append([(r.name, r.levelname, r.getMessage()) for r in caplog.records if r.name == "django.request"])
    assert logged[0] == logged[1] == [("django.request", "WARNING", f"Not Found: {path}")]
