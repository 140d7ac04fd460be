"""Swagger explains itself: every operation of the served schema has a tag, a summary and a
description, and the bodies that matter carry examples that the server takes as they are."""

import factories
import pytest

from api.operations import EXAMPLES, OPERATIONS
from streams.models import Stream

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "put", "patch", "delete")


def operations(client):
    schema = client.get("/api/v1/schema/?format=json").json()
    return [op for item in schema["paths"].values() for m, op in item.items() if m in METHODS], schema


def test_every_operation_has_a_tag_summary_and_description(client):
    ops, schema = operations(client)
    missing = [op["operationId"] for op in ops if op["operationId"] not in OPERATIONS]
    assert missing == []
    assert set(OPERATIONS) - {op["operationId"] for op in ops} == set()  # no entry for a gone endpoint
    tags = {t["name"] for t in schema["tags"]}
    for op in ops:
        assert op["summary"] and len(op["description"]) >= 40, op["operationId"]
        assert op["tags"] and set(op["tags"]) <= tags, op["operationId"]


def test_the_bodies_that_matter_have_examples(client):
    ops, _ = operations(client)
    by_id = {op["operationId"]: op for op in ops}
    for op_id in (
        "streams_events_create",
        "reader_groups_read_create",
        "reader_groups_ack_create",
        "reader_groups_truncation_cut_create",
        "reader_groups_seek_create",
    ):
        examples = by_id[op_id]["requestBody"]["content"]["application/json"]["examples"]
        assert examples == EXAMPLES[op_id] and all(e["summary"] and e["value"] for e in examples.values())


def test_the_examples_are_taken_by_the_server(api, data_dir):
    """Each example body, sent as it is where the names it uses exist, is accepted: an example a
    person copies from Swagger works. The ack and nack examples name deliveries that are not live
    here: the server refuses them for that alone (`unknown_delivery`), not for their shape."""

    def send(op_id: str, method: str, path: str, expect: int, code: str | None = None) -> None:
        for name, example in EXAMPLES[op_id].items():
            answer = getattr(api, method)(path, example["value"], format="json")
            assert answer.status_code == expect, (op_id, name, answer.json())
            if code:
                assert answer.json()["code"] == code, (op_id, name, answer.json())

    send("streams_create", "post", "/api/v1/streams/", 201)
    orders = Stream.objects.get(scope__name="shop", name="orders")
    factories.publish(orders, 120, routing_key=factories.routing_key_for(orders, "0"))
    factories.publish(orders, 97, routing_key=factories.routing_key_for(orders, "1"))
    returns = factories.make_stream("returns", scope="shop")
    factories.publish(returns, 12)
    send("streams_events_create", "post", "/api/v1/streams/shop/orders/events/", 201)
    send("streams_retention_policy_update", "put", "/api/v1/streams/shop/orders/retention-policy/", 200)
    send("reader_groups_create", "post", "/api/v1/reader-groups/", 201)
    G = "/api/v1/reader-groups/shop/billing/"
    send("reader_groups_read_create", "post", G + "read/", 200)
    send("reader_groups_ack_create", "post", G + "ack/", 400, "unknown_delivery")
    send("reader_groups_nack_create", "post", G + "nack/", 400, "unknown_delivery")
    send("reader_groups_checkpoints_create", "post", G + "checkpoints/", 201)
    send("reader_groups_seek_create", "post", G + "seek/", 200)
    factories.create_group_over_api(
        api, "manual", streams=("shop/orders", "shop/returns"), retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT"
    )
    for _ in range(3):  # the example names generation 3
        api.patch("/api/v1/reader-groups/shop/manual/", {"ack_timeout_s": 31}, format="json")
    send("reader_groups_truncation_cut_create", "post", "/api/v1/reader-groups/shop/manual/truncation-cut/", 200)
