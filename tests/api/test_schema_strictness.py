"""The OpenAPI schema is as strict as the server about request bodies: a body the server refuses
(an unknown field, an empty list, a malformed cut or 'scope/name') is refused by the schema too,
so a client generated from it refuses it before sending; and a body the server takes, the schema
takes. Each case is checked both ways: against the served schema (a JSON-schema validator) and
against the server."""

from __future__ import annotations

import factories
import pytest
from django.test import Client
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from domain.events import EventIn
from streams import services

pytestmark = pytest.mark.django_db

S = "/api/v1/streams/{scope}/{name}/"
RG = "/api/v1/reader-groups/{scope}/{name}/"
CUT = {"0": 0, "1": 0}

# (operation, body the server refuses, the field its 400 names): one unknown field per operation
# that takes a body (test_every_operation_with_a_body_has_an_unknown_field_case keeps it so), then
# the other ways a body breaks the schema
REFUSED = [
    (("post", "/api/v1/auth/token/"), {"username": "bob", "password": "x", "remember": True}, "remember"),
    (("post", "/api/v1/streams/"), {"scope": "shop", "name": "x", "segmentcount": 2}, "segmentcount"),
    (("patch", S), {"descripton": "typo"}, "descripton"),
    (("put", S + "retention-policy/"), {"limit_type": "time", "min": 5, "consumption": True}, "consumption"),
    (("post", S + "events/"), {"events": [{"payload": "a"}], "key": "k"}, "key"),
    (("post", S + "truncate/"), {"stream_cut": CUT, "force": True}, "force"),
    (("post", S + "purge/"), {"to": "tail", "force": True}, "force"),
    (("post", S + "republish/"), {"all": True, "every": True}, "every"),
    (("post", S + "scale/"), {"seal": ["0"], "new_ranges": [[0, 0.5]], "force": True}, "force"),
    (("put", S + "scaling-policy/"), {"type": "fixed", "max": 3}, "scaling_policy.max"),
    (
        ("post", "/api/v1/reader-groups/"),
        {"scope": "shop", "name": "g", "streams": ["shop/orders"], "sink": "a"},
        "sink",
    ),
    (("patch", RG), {"generation": 0, "max_delivery": 3}, "max_delivery"),
    (("post", RG + "truncation-cut/"), {"stream": "shop/orders", "stream_cut": CUT, "generaton": 0}, "generaton"),
    (("post", RG + "read/"), {"max_events": 1, "max_event": 2}, "max_event"),
    (("post", "/api/v1/reads/"), {"reads": [{"reader_group": "shop/g", "max_events": 1}], "read": 1}, "read"),
    (("post", RG + "ack/"), {"delivery_ids": ["1-1-0-0-1"], "sinc": "a"}, "sinc"),
    (("post", RG + "nack/"), {"delivery_ids": ["1-1-0-0-1"], "delay": 5}, "delay"),
    (("post", RG + "checkpoints/"), {"name": "cp", "persists": True}, "persists"),
    (("post", RG + "seek/"), {"position": "head", "positon": "tail"}, "positon"),
    (("put", "/api/v1/scopes/{scope}/defaults/"), {"cleanup": "compact"}, "cleanup"),
    (("post", "/api/v1/retention/cycles/"), {"streams": "shop/orders"}, "streams"),
    (
        ("post", "/api/v1/api-keys/"),
        {"name": "k", "kind": "publish", "streams": ["shop/orders"], "scope": "x"},
        "scope",
    ),
    # unknown fields in nested objects
    (
        ("post", "/api/v1/streams/"),
        {"scope": "shop", "name": "x", "retention_policy": {"limit_type": "size", "minimum": 2}},
        "retention_policy.minimum",
    ),
    (
        ("post", "/api/v1/streams/"),
        {"scope": "shop", "name": "x", "delayed_index": {"max_buckets": 3}},
        "delayed_index.max_buckets",
    ),
    (("post", S + "events/"), {"events": [{"payload": "a", "kye": "k"}]}, "events[0].kye"),
    # empty lists (minItems)
    (("post", S + "events/"), {"events": []}, "events"),
    (("post", "/api/v1/reader-groups/"), {"scope": "shop", "name": "g", "streams": []}, "streams"),
    (("patch", RG), {"streams": []}, "streams"),
    (("post", RG + "ack/"), {"delivery_ids": []}, "delivery_ids"),
    (("post", RG + "nack/"), {"delivery_ids": []}, "delivery_ids"),
    (("post", "/api/v1/api-keys/"), {"name": "k", "kind": "publish", "streams": []}, "streams"),
    # 'scope/name' and names (patterns)
    (("post", "/api/v1/streams/"), {"scope": "shop/x", "name": "x"}, "scope"),
    (("post", "/api/v1/streams/"), {"scope": "shop", "name": "a b"}, "name"),
    (("post", "/api/v1/reader-groups/"), {"scope": "shop", "name": "g", "streams": ["orders"]}, "streams[0]"),
    (("post", "/api/v1/reader-groups/"), {"scope": "shop", "name": "g", "streams": ["shop/orders/x"]}, "streams[0]"),
    (("post", RG + "truncation-cut/"), {"stream": "shop:orders", "stream_cut": CUT}, "stream"),
    (("post", "/api/v1/retention/cycles/"), {"stream": "shop"}, "stream"),
    (("post", "/api/v1/api-keys/"), {"name": "k", "kind": "reader_group", "reader_group": "billing"}, "reader_group"),
    # stream cuts (segment ids as the server writes them, offsets >= 0)
    (("post", S + "truncate/"), {"stream_cut": {"00": 1, "1": 1}}, "stream_cut.00"),
    (("post", S + "truncate/"), {"stream_cut": {"0": -1, "1": 0}}, "stream_cut.0"),
    (("post", S + "truncate/"), {"stream_cut": {"0": 1, "٣": 0}}, "stream_cut.٣"),
    (("post", RG + "truncation-cut/"), {"stream": "shop/orders", "stream_cut": {"0": 0, "x": 0}}, "stream_cut.x"),
    (("post", RG + "truncation-cut/"), {"stream": "shop/orders", "stream_cut": {"0": 0, "1": -3}}, "stream_cut.1"),
    # lists the server wants without repeats (uniqueItems)
    (
        ("post", "/api/v1/reader-groups/"),
        {"scope": "shop", "name": "g", "streams": ["shop/orders"], "sinks": ["a", "a"]},
        "sinks",
    ),
    (("patch", RG), {"sinks": ["x", "x"]}, "sinks"),
    (("post", "/api/v1/reader-groups/"), {"scope": "shop", "name": "g", "streams": ["shop/orders"] * 2}, "streams[1]"),
    (("patch", RG), {"streams": ["shop/orders", "shop/orders"]}, "streams[1]"),
    (("post", "/api/v1/api-keys/"), {"name": "k", "kind": "publish", "streams": ["shop/orders"] * 2}, "streams[1]"),
    # sink and checkpoint names (their patterns), and "." and ".." as names
    (
        ("post", "/api/v1/reader-groups/"),
        {"scope": "shop", "name": "g", "streams": ["shop/orders"], "sinks": ["a b"]},
        "sinks",
    ),
    (("patch", RG), {"sinks": ["x" * 65]}, "sinks[0]"),
    (("post", RG + "ack/"), {"delivery_ids": ["1-1-0-0-1"], "sink": "a b"}, "sink"),
    (("post", RG + "nack/"), {"delivery_ids": ["1-1-0-0-1"], "sink": "a/b"}, "sink"),
    (("post", RG + "read/"), {"max_events": 1, "ack": {"delivery_ids": ["1-1-0-0-1"], "sink": "a b"}}, "ack.sink"),
    (("post", RG + "checkpoints/"), {"name": "a b"}, "name"),
    (("post", RG + "checkpoints/"), {"name": "cp/1"}, "name"),
    (("post", RG + "checkpoints/"), {"name": "auto-20260101"}, "name"),
    (("post", "/api/v1/streams/"), {"scope": "shop", "name": ".."}, "name"),
    (("post", "/api/v1/reader-groups/"), {"scope": ".", "name": "g", "streams": ["shop/orders"]}, "scope"),
    (("post", "/api/v1/reader-groups/"), {"scope": "shop", "name": "g", "streams": ["../orders"]}, "streams[0]"),
    (("post", RG + "truncation-cut/"), {"stream": "shop/..", "stream_cut": CUT}, "stream"),
    # cuts of several streams: named 'scope/name', one at least where the server wants one
    (("post", RG + "truncation-cut/"), {"stream_cuts": {}}, "stream_cuts"),
    (("post", RG + "truncation-cut/"), {"stream_cuts": {"orders": CUT}}, "stream_cuts.orders"),
    (("post", RG + "seek/"), {"stream_cuts": {}}, "stream_cuts"),
    (("post", RG + "seek/"), {"stream_cuts": {"orders": CUT}}, "stream_cuts.orders"),
    (
        ("post", "/api/v1/reader-groups/"),
        {"scope": "shop", "name": "g", "streams": ["shop/orders"], "start": {"stream_cuts": {}}},
        "start.stream_cuts",
    ),
    (
        ("post", "/api/v1/reader-groups/"),
        {"scope": "shop", "name": "g", "streams": ["shop/orders"], "end_stream_cuts": {"orders": CUT}},
        "end_stream_cuts.orders",
    ),
    # bodies that need one of several fields, or not two at once
    (("post", RG + "truncation-cut/"), {}, "stream"),
    (("post", RG + "truncation-cut/"), {"generation": 0}, "stream"),
    (("post", RG + "truncation-cut/"), {"stream": "shop/orders"}, "stream_cut"),
    (("post", RG + "truncation-cut/"), {"stream_cut": CUT}, "stream"),
    (
        ("post", RG + "truncation-cut/"),
        {"stream": "shop/orders", "stream_cut": CUT, "stream_cuts": {"shop/orders": CUT}},
        "stream",
    ),
    (("post", RG + "truncation-cut/"), {"stream_cuts": {"shop/orders": CUT}, "stream_cut": CUT}, "stream_cut"),
    (("post", RG + "seek/"), {}, "position"),
    (("post", RG + "seek/"), {"generation": 0}, "position"),
    (("post", RG + "seek/"), {"position": "head", "time": "2026-01-01T00:00:00Z"}, "time"),
    (("post", S + "events/"), {"events": [{}]}, "events[0].payload"),
    (("post", S + "events/"), {"events": [{"headers": {"h": "v"}}]}, "events[0].payload"),
    (("post", S + "events/"), {"events": [{"payload": "a", "payload_b64": "AA=="}]}, "events[0].payload"),
    (
        ("post", S + "events/"),
        {"events": [{"payload": "a", "deliver_at": "2030-01-01T00:00:00Z", "delay_ms": 5}]},
        "events[0].deliver_at",
    ),
    (("post", "/api/v1/api-keys/"), {"name": "k", "kind": "publish"}, "streams"),
    (("post", "/api/v1/api-keys/"), {"name": "k", "kind": "reader_group"}, "reader_group"),
    (
        ("post", "/api/v1/api-keys/"),
        {"name": "k", "kind": "publish", "streams": ["shop/orders"], "reader_group": "shop/billing"},
        "reader_group",
    ),
    (
        ("post", "/api/v1/api-keys/"),
        {"name": "k", "kind": "reader_group", "reader_group": "shop/billing", "streams": ["shop/orders"]},
        "streams",
    ),
    (("put", S + "retention-policy/"), {"limit_type": "none", "min": 5}, "limit_type"),
    (("put", S + "retention-policy/"), {"limit_type": "none", "max": 10}, "limit_type"),
]

ACCEPTED = [
    (
        ("post", "/api/v1/streams/"),
        {
            "scope": "shop",
            "name": "new.one_2",
            "segment_count": 2,
            "retention_policy": {"limit_type": "size", "min": 1, "max": None},
            "delayed_index": {"max_num_buckets": None},
        },
        201,
    ),
    (("post", S + "events/"), {"events": [{"payload": "a", "headers": {"h": "v"}}, {"payload_b64": "AA=="}]}, 201),
    (("post", S + "truncate/"), {"stream_cut": {"0": 0, "1": 0}}, 200),
    (("post", "/api/v1/reader-groups/"), {"scope": "shop", "name": "g2", "streams": ["shop/orders"]}, 201),
    (("post", RG + "truncation-cut/"), {"stream": "shop/orders", "stream_cut": {"0": 1, "1": 0}}, 200),
    (("post", "/api/v1/api-keys/"), {"name": "k", "kind": "publish", "streams": ["shop/orders"]}, 201),
    # the fields issue 37 named, and the others of their kind, as the server takes them
    (
        ("post", "/api/v1/reader-groups/"),
        {"scope": "shop", "name": "fan", "streams": ["shop/orders"], "sinks": ["search", "audit:eu-1.b_2"]},
        201,
    ),
    (("patch", RG), {"sinks": ["x" * 64]}, 200),
    (("post", RG + "checkpoints/"), {"name": "before:migration-2.0_b"}, 201),
    (("post", RG + "checkpoints/"), {"name": "autumn"}, 201),
    (("post", RG + "truncation-cut/"), {"stream_cuts": {"shop/orders": {"0": 1, "1": 0}}, "generation": 0}, 200),
    (("post", RG + "seek/"), {"position": "tail", "generation": 0}, 200),
    (("post", RG + "seek/"), {"time": "2026-01-01T00:00:00Z"}, 200),
    (("post", RG + "seek/"), {"stream_cuts": {"shop/orders": {"0": 1, "1": 0}}}, 200),
    (
        ("post", "/api/v1/reader-groups/"),
        {"scope": "shop", "name": "bounded", "streams": ["shop/orders"], "end_stream_cuts": {}},
        201,
    ),
    (
        ("post", "/api/v1/reader-groups/"),
        {"scope": "shop", "name": "from", "streams": ["shop/orders"], "start": {"stream_cuts": {"shop/orders": CUT}}},
        201,
    ),
    (
        ("post", S + "events/"),
        {"events": [{"payload_b64": "AA==", "delay_ms": 5}, {"payload": "", "deliver_at": "2030-01-01T00:00:00Z"}]},
        201,
    ),
    (("post", "/api/v1/api-keys/"), {"name": "k", "kind": "reader_group", "reader_group": "shop/billing"}, 201),
    (("post", S + "events/"), {"events": [{"payload": None, "payload_b64": "AA==", "delay_ms": None}]}, 201),
    (("post", S + "events/"), {"events": [{"payload": "", "deliver_at": None, "delay_ms": 5, "key": None}]}, 201),
    (("post", S + "events/"), {"events": [{"payload": "", "deliver_at": 0}, {"payload": "", "deliver_at": None}]}, 201),
    (("post", RG + "seek/"), {"position": "head", "generation": None}, 200),
    (("post", RG + "truncation-cut/"), {"stream": "shop/orders", "stream_cut": CUT, "generation": None}, 200),
    (("put", S + "retention-policy/"), {"limit_type": "none", "min": 0, "max": None}, 200),
    (("put", S + "retention-policy/"), {"limit_type": "time", "max": 60}, 200),
]


@pytest.fixture(scope="module")
def schema():
    return Client().get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()


def as_json_schema(node):
    """OpenAPI 3.0's `nullable` in JSON-schema terms; the schema's other keywords are JSON schema's."""
    if isinstance(node, list):
        return [as_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: as_json_schema(value) for key, value in node.items()}
    if node.pop("nullable", False):
        return {"anyOf": [node, {"type": "null"}]}
    return node


def body_validator(schema: dict, method: str, path: str) -> Draft202012Validator:
    """A validator of the JSON body `method path` takes, as a generated client would have it."""
    body = schema["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
    document = Resource.from_contents(as_json_schema(schema), default_specification=DRAFT202012)
    return Draft202012Validator(
        {"$ref": "urn:cbr" + body["$ref"]}, registry=Registry().with_resource("urn:cbr", document)
    )


@pytest.fixture
def world(plain_user, test_broker):
    """shop/orders (two segments, an event on each, a retention policy) and shop/billing, a
    MANUAL subscriber of it."""
    stream = factories.make_stream(segment_count=2, policy={"limit_type": "size", "min": 1})
    services.do_publish(stream, [EventIn(b"a", routing_key=f"k{i}".encode()) for i in range(8)])
    factories.make_group(stream, retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT")
    return stream


def url(path: str) -> str:
    return path.format(scope="shop", name="billing" if path.startswith("/api/v1/reader-groups/") else "orders")


def send(api, method: str, path: str, body: dict):
    return getattr(api, method)(url(path), body, format="json")


def test_every_operation_with_a_body_has_an_unknown_field_case(schema):
    with_a_body = {  # a JSON body (a large event's is bytes: its fields are in the query, tests/api/test_large_events_api.py)
        (method, path)
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if "application/json" in operation.get("requestBody", {}).get("content", {})
    }
    assert with_a_body == {operation for operation, _, _ in REFUSED[:22]}


@pytest.mark.parametrize("operation, body, field", REFUSED, ids=[f"{m} {p} {f}" for (m, p), _, f in REFUSED])
def test_the_schema_refuses_what_the_server_refuses(schema, api, world, operation, body, field):
    # when the server is sent the body
    response = send(api, *operation, body)

    # then it refuses it, naming the field, and so does the schema
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    errors = list(body_validator(schema, *operation).iter_errors(body))
    assert errors, f"the schema of {operation} takes {body}, which the server refuses"


@pytest.mark.parametrize("operation, body, status", ACCEPTED, ids=[f"{m} {p}" for (m, p), _, _ in ACCEPTED])
def test_the_schema_takes_what_the_server_takes(schema, api, world, operation, body, status):
    assert not list(body_validator(schema, *operation).iter_errors(body))
    response = send(api, *operation, body)
    assert response.status_code == status, response.content
