import re

import pytest

from store.store import key_space_position
from streams.models import Segment, Stream

pytestmark = pytest.mark.django_db


def create(api, **body):
    body = {"scope": "shop", "name": "orders", "segment_count": 2, **body}
    return api.post("/api/v1/streams/", body, format="json")


def test_anonymous_requests_are_refused(client):
    response = client.get("/api/v1/streams/")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_a_token_is_issued_for_a_username_and_password(client, plain_user):
    response = client.post(
        "/api/v1/auth/token/", {"username": "bob", "password": "pw-bob-123"}, content_type="application/json"
    )
    assert response.status_code == 200
    token = response.json()["token"]
    listed = client.get("/api/v1/streams/", HTTP_AUTHORIZATION=f"Token {token}")
    assert listed.status_code == 200 and listed.json()["results"] == []
    bad = client.post("/api/v1/auth/token/", {"username": "bob", "password": "nope"}, content_type="application/json")
    assert bad.status_code == 401  # bad credentials, as docs/api.md says (DRF answered 400)
    assert bad.json()["code"] == "authentication_failed"
    assert "field" not in bad.json()  # no field of the body is wrong: the pair is
    assert bad["WWW-Authenticate"] == "Token"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"username": "bob"}, "password"),
        ({"password": "pw-bob-123"}, "username"),
        ({"username": 7, "password": "pw-bob-123"}, "username"),
        ({"username": "bob", "password": "pw-bob-123", "otp": "1"}, "otp"),
    ],
)
def test_a_token_request_with_a_missing_wrong_or_unknown_field_is_a_400_naming_it(client, plain_user, body, field):
    response = client.post("/api/v1/auth/token/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["field"] == field


def test_it_creates_a_stream_with_its_segments_and_policy(api):
    response = create(api, retention_policy={"limit_type": "size", "min": 100, "max": 1000, "consumption_based": True})
    assert response.status_code == 201
    body = response.json()
    assert body["full_name"] == "shop/orders"
    assert body["head_cut"] == {"0": 0, "1": 0} and body["tail_cut"] == {"0": 0, "1": 0}
    assert body["retention_policy"]["min"] == 100 and body["retention_policy"]["max"] == 1000
    assert body["retention_policy"]["consumption_based"] is True
    stream = Stream.objects.get(name="orders")
    assert sorted(Segment.objects.filter(stream=stream).values_list("segment_id", flat=True)) == ["0", "1"]


def test_a_duplicate_name_is_a_409(api):
    create(api)
    response = create(api)
    assert response.status_code == 409
    assert response.json()["field"] == "name"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"name": "bad name"}, "name"),
        ({"name": ".."}, "name"),
        ({"scope": "x" * 129}, "scope"),
        ({"segment_count": 0}, "segment_count"),
        ({"segment_count": "2"}, "segment_count"),
        ({"segment_count": 2.5}, "segment_count"),
        ({"segment_count": 1000}, "segment_count"),
        ({"cleanup_policy": "shred"}, "cleanup_policy"),
        ({"on_max_limit": "explode"}, "on_max_limit"),
        ({"retention_policy": {"limit_type": "weeks"}}, "retention_policy.limit_type"),
        ({"retention_policy": {"limit_type": "size", "min": -1}}, "retention_policy.min"),
        ({"retention_policy": {"limit_type": "size", "min": 10, "max": 5}}, "retention_policy.max"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_stream_bodies_are_400s_naming_the_field(api, body, field):
    response = create(api, **body)
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    assert not Stream.objects.exists()


def test_malformed_json_is_a_400(api):
    response = api.post("/api/v1/streams/", b"{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "malformed_json"


def test_list_is_paginated_and_searchable(api):
    for i in range(7):
        create(api, name=f"s{i}", segment_count=1)
    create(api, scope="other", name="x", segment_count=1)
    page = api.get("/api/v1/streams/?limit=3").json()
    assert len(page["results"]) == 3 and page["count"] == 8 and page["next"]
    assert [s["name"] for s in api.get("/api/v1/streams/?scope=other").json()["results"]] == ["x"]
    assert api.get("/api/v1/streams/?search=s6").json()["count"] == 1


def test_detail_of_an_unknown_stream_is_a_404(api):
    response = api.get("/api/v1/streams/shop/nope/")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_patch_changes_settings_and_refuses_fixed_fields(api):
    create(api)
    ok = api.patch("/api/v1/streams/shop/orders/", {"on_max_limit": "reject_publish"}, format="json")
    assert ok.status_code == 200 and ok.json()["on_max_limit"] == "reject_publish"
    for field, value in [("segment_count", 3), ("name", "x"), ("retention_policy", {})]:
        bad = api.patch("/api/v1/streams/shop/orders/", {field: value}, format="json")
        assert bad.status_code == 400 and bad.json()["field"] == field
    assert Stream.objects.get().segment_count == 2


def test_only_admins_delete_streams_and_the_files_go_too(api, user_api, data_dir, django_capture_on_commit_callbacks):
    create(api)
    publish = api.post("/api/v1/streams/shop/orders/events/", {"events": [{"payload": "x"}]}, format="json")
    assert publish.status_code == 201
    stream_dir = data_dir / "streams" / Stream.objects.get().storage_key
    assert stream_dir.exists()
    assert user_api.delete("/api/v1/streams/shop/orders/").status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        assert api.delete("/api/v1/streams/shop/orders/").status_code == 204
    assert not Stream.objects.exists()
    assert not stream_dir.exists()


def test_policy_put_validates_and_is_admin_only(api, user_api):
    create(api)
    url = "/api/v1/streams/shop/orders/retention-policy/"
    body = {"limit_type": "time", "min": 60, "max": 3600, "consumption_based": True, "fallback_after_s": 600}
    assert user_api.put(url, body, format="json").status_code == 403
    ok = api.put(url, body, format="json")
    assert ok.status_code == 200 and ok.json()["fallback_after_s"] == 600
    assert api.get(url).json()["max"] == 3600
    for bad, field in [
        ({**body, "min": -5}, "min"),
        ({**body, "max": 10}, "max"),
        ({**body, "limit_type": "forever"}, "limit_type"),
        ({**body, "consumption_based": "yes"}, "consumption_based"),
        ({**body, "min": "60"}, "min"),
        ({"limit_type": "none", "min": 5}, "limit_type"),
    ]:
        response = api.put(url, bad, format="json")
        assert response.status_code == 400 and response.json()["field"] == field
    assert api.get(url).json()["min"] == 60  # nothing half-written


def test_openapi_schema_and_docs_are_served_offline(client):
    schema = client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/v1/streams/{scope}/{name}/events/" in paths
    docs = client.get("/api/v1/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "swagger-ui" in html
    # every script and stylesheet from this server (a CSRF token in the page may spell "cdn")
    loaded = re.findall(r'(?:src|href)\s*=\s*["\']([^"\']+)["\']', html)
    assert any("swagger-ui" in url for url in loaded)
    assert not [url for url in loaded if re.match(r"(?i)(https?:)?//", url)], loaded


def test_a_stream_shows_its_segments_key_ranges_and_keys_land_where_they_say(api):
    assert create(api, segment_count=3).status_code == 201
    detail = api.get("/api/v1/streams/shop/orders/").json()
    assert detail["epoch"] == 0
    segments = {s["id"]: s for s in detail["segments"]}
    assert [s["key_range"] for s in segments.values()] == [[0.0, 1 / 3], [1 / 3, 2 / 3], [2 / 3, 1.0]]
    assert all(s["epoch"] == 0 and not s["sealed"] and s["predecessors"] == [] for s in segments.values())
    # each routing key's events land in the segment whose range holds the key's hash
    keys = [f"customer-{n}" for n in range(60)]
    events = [{"payload": "x", "routing_key": k} for k in keys]
    published = api.post("/api/v1/streams/shop/orders/events/", {"events": events}, format="json").json()
    for key, written in zip(keys, published["positions"], strict=True):
        lo, hi = segments[written["segment"]]["key_range"]
        assert lo <= key_space_position(key.encode()) < hi
    assert len({w["segment"] for w in published["positions"]}) == 3
    refused = api.patch("/api/v1/streams/shop/orders/", {"segments": []}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "segments"
