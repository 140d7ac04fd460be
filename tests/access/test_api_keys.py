"""API keys: shown once, stored hashed, scoped, revocable, with a last-used time; bad requests
name the field and make nothing."""

from __future__ import annotations

from datetime import timedelta

import factories
import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from access.models import ApiKey
from access.token_cache import forget_tokens
from cbr_client import CBRError, Client
from domain.events import parse_batch
from streams import logs, services
from streams.models import Stream

pytestmark = pytest.mark.django_db
KEYS = "/api/v1/api-keys/"
GROUP = "/api/v1/reader-groups/shop/billing/"


@pytest.fixture
def shop():
    orders = factories.make_stream()
    factories.make_stream("refunds")
    factories.make_group(orders)
    factories.make_group(orders, name="audit")
    return orders


def keyed(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return client


def make_key(api, **body) -> dict:
    body = {"name": "billing-worker", "kind": "reader_group", "reader_group": "shop/billing", **body}
    response = api.post(KEYS, {k: v for k, v in body.items() if v is not None}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_a_key_is_shown_once_and_kept_only_as_a_hash(operator_api, shop):
    made = make_key(operator_api)
    key = made["key"]
    assert key.startswith(made["prefix"] + ".") and len(key) == 8 + 1 + 32
    assert made["created_by"] == "olga" and made["state"] == "active" and made["reader_group"] == "shop/billing"
    row = ApiKey.objects.values().get()
    assert key not in str(row) and key.split(".")[1] not in str(row)
    assert row["hashed_key"].startswith("sha512$$")
    listed = operator_api.get(KEYS).json()["results"]
    assert [k["prefix"] for k in listed] == [made["prefix"]]
    assert "key" not in listed[0] and "key" not in operator_api.get(f"{KEYS}{made['prefix']}/").json()


def test_a_reader_group_key_consumes_its_group_and_nothing_else(operator_api, shop):
    services.do_publish(shop, _events("a", "b"))
    worker = keyed(make_key(operator_api)["key"])

    read = worker.post(GROUP + "read/", {"max_events": 10}, format="json")
    assert read.status_code == 200
    deliveries = read.json()["deliveries"]
    assert [d["payload"] for d in deliveries] == ["a", "b"]
    acked = worker.post(GROUP + "ack/", {"delivery_ids": [d["delivery_id"] for d in deliveries]}, format="json")
    assert acked.json()["acked"] == 2
    assert worker.get(GROUP).status_code == 200

    assert worker.post("/api/v1/reader-groups/shop/audit/read/", {"max_events": 10}, format="json").status_code == 403
    assert (
        worker.post("/api/v1/streams/shop/orders/events/", {"events": [{"payload": "c"}]}, format="json").status_code
        == 403
    )
    assert worker.patch(GROUP, {"ack_timeout_s": 5}, format="json").status_code == 403
    assert logs.stream_log(shop).tail_cut() == {"0": 2}


def test_a_publish_key_publishes_on_its_streams_only(operator_api, shop):
    made = make_key(operator_api, kind="publish", reader_group=None, streams=["shop/orders"])
    assert made["streams"] == ["shop/orders"]
    producer = keyed(made["key"])
    assert (
        producer.post("/api/v1/streams/shop/orders/events/", {"events": [{"payload": "x"}]}, format="json").status_code
        == 201
    )
    refused = producer.post("/api/v1/streams/shop/refunds/events/", {"events": [{"payload": "y"}]}, format="json")
    assert refused.status_code == 403
    assert refused.json()["message"] == "this API key is for the streams shop/orders only"
    assert producer.get("/api/v1/streams/shop/orders/events/").status_code == 403  # publishing is not reading
    assert logs.stream_log(shop).tail_cut() == {"0": 1}


def test_a_revoked_key_is_refused_at_once_and_revoking_again_changes_nothing(operator_api, shop):
    made = make_key(operator_api)
    worker = keyed(made["key"])
    assert worker.get(GROUP).status_code == 200
    assert operator_api.delete(f"{KEYS}{made['prefix']}/").status_code == 204
    first = ApiKey.objects.get().revoked_at
    response = worker.get(GROUP)
    assert response.status_code == 401
    assert response.json() == {"code": "authentication_failed", "message": "unknown or revoked API key"}
    assert operator_api.delete(f"{KEYS}{made['prefix']}/").status_code == 204
    assert ApiKey.objects.get().revoked_at == first
    assert operator_api.get(f"{KEYS}{made['prefix']}/").json()["state"] == "revoked"


def test_a_wrong_secret_an_expired_key_and_a_deleted_group_are_refused(operator_api, shop):
    made = make_key(operator_api)
    assert keyed(made["prefix"] + ".x" * 16).get(GROUP).status_code == 401
    assert keyed("no-dot-at-all").get(GROUP).status_code == 401
    key = ApiKey.objects.get()
    key.expires_at = timezone.now() - timedelta(seconds=1)
    key.save()  # a saved key leaves the process's cache of lookups (access/token_cache.py)
    assert keyed(made["key"]).get(GROUP).json()["message"] == "this API key has expired"
    key.expires_at = None
    key.save()
    assert keyed(made["key"]).get(GROUP).status_code == 200
    assert operator_api.delete(GROUP).status_code == 204
    assert keyed(made["key"]).get(GROUP).status_code == 401  # the key went with its group


def test_the_last_used_time_moves_when_a_key_is_used_at_most_once_a_minute(operator_api, shop):
    made = make_key(operator_api)
    assert made["last_used_at"] is None
    keyed(made["key"]).get(GROUP)
    first = ApiKey.objects.get().last_used_at
    assert first is not None
    keyed(made["key"]).get(GROUP)
    assert ApiKey.objects.get().last_used_at == first
    ApiKey.objects.update(last_used_at=first - timedelta(minutes=2))
    forget_tokens()  # as if the process's cached lookup had run out, as it has two minutes later
    keyed(made["key"]).get(GROUP)
    assert ApiKey.objects.get().last_used_at > first


@pytest.mark.parametrize(
    "body, status, field",
    [
        ({}, 400, "name"),
        ({"name": " ", "kind": "publish", "streams": ["shop/orders"]}, 400, "name"),
        ({"name": "x", "kind": "admin"}, 400, "kind"),
        ({"name": "x", "kind": "reader_group"}, 400, "reader_group"),
        ({"name": "x", "kind": "reader_group", "reader_group": "billing"}, 400, "reader_group"),
        ({"name": "x", "kind": "reader_group", "reader_group": "shop/nope"}, 404, "reader_group"),
        (
            {"name": "x", "kind": "reader_group", "reader_group": "shop/billing", "streams": ["shop/orders"]},
            400,
            "streams",
        ),
        ({"name": "x", "kind": "publish"}, 400, "streams"),
        ({"name": "x", "kind": "publish", "streams": []}, 400, "streams"),
        ({"name": "x", "kind": "publish", "streams": ["shop/nope"]}, 404, "streams[0]"),
        ({"name": "x", "kind": "publish", "streams": ["shop/orders", "shop/orders"]}, 400, "streams[1]"),
        (
            {"name": "x", "kind": "publish", "streams": ["shop/orders"], "reader_group": "shop/billing"},
            400,
            "reader_group",
        ),
        (
            {"name": "x", "kind": "publish", "streams": ["shop/orders"], "expires_at": "2001-01-01T00:00:00Z"},
            400,
            "expires_at",
        ),
        ({"name": "x", "kind": "publish", "streams": ["shop/orders"], "expires_at": "soon"}, 400, "expires_at"),
        ({"name": "x", "kind": "publish", "streams": ["shop/orders"], "colour": "red"}, 400, "colour"),
    ],
)
def test_a_bad_key_request_names_the_field_and_makes_no_key(operator_api, shop, body, status, field):
    response = operator_api.post(KEYS, body, format="json")
    assert response.status_code == status, response.content
    assert response.json()["field"] == field
    assert not ApiKey.objects.exists()


def test_the_client_consumes_with_a_key(live_server, operator_api, shop):
    services.do_publish(shop, _events("one"))
    worker = Client(live_server.url, api_key=make_key(operator_api)["key"])
    group = worker.reader_group("shop/billing")
    got = []
    for message in group.consume(max_events=10, wait_ms=0, idle_stop=True):
        with message:
            got.append(message.text)
    assert got == ["one"]
    with pytest.raises(CBRError) as refused:
        worker.publish("shop/orders", ["two"])
    assert refused.value.status == 403


def _events(*payloads):
    stream = Stream.objects.get(name="orders")
    return parse_batch({"events": [{"payload": p} for p in payloads]}, logs.publish_limits(stream), 0)


def test_a_key_name_must_be_text(operator_api, shop):
    response = operator_api.post(
        KEYS, {"name": 0, "kind": "reader_group", "reader_group": "shop/billing"}, format="json"
    )
    assert response.status_code == 400 and response.json()["field"] == "name"
    assert not ApiKey.objects.exists()
