"""Sign-in is rate-limited (failures only, per address and per username) and console writes are
CSRF-protected."""

from __future__ import annotations

import factories
import pytest
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

from retention.models import RetentionCycle
from streams import services

pytestmark = pytest.mark.django_db
TOKEN = "/api/v1/auth/token/"


@pytest.fixture(autouse=True)
def fresh_counts(settings):
    settings.CBR_LOGIN_FAILURES = "3/m"
    cache.clear()
    yield
    cache.clear()


def sign_in(client, password, username="bob", addr="10.0.0.1"):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=addr)


def test_after_too_many_failures_even_the_right_password_waits(plain_user):
    client = Client()
    for _ in range(3):
        assert sign_in(client, "wrong").status_code == 200  # the form again, with its error
    blocked = sign_in(client, "pw-bob-123")
    assert blocked.status_code == 429
    assert 0 < int(blocked["Retry-After"]) <= 60
    assert "_auth_user_id" not in client.session


def test_a_blocked_console_sign_in_is_the_sign_in_page_saying_why(plain_user):
    # given a browser that failed too often
    client = Client()
    for _ in range(3):
        sign_in(client, "wrong")

    # when it signs in again, from a page it was sent to sign in for
    blocked = client.post(
        "/login/", {"username": "bob", "password": "pw-bob-123", "next": "/streams/"}, REMOTE_ADDR="10.0.0.1"
    )

    # then it gets the sign-in page (not JSON), with the reason, the wait and the form to try again
    assert blocked.status_code == 429
    assert blocked["Content-Type"].startswith("text/html")
    page = blocked.content.decode()
    assert f"Too many failed sign-ins; try again in {blocked['Retry-After']} s." in page
    assert '<form class="login" method="post">' in page and 'name="csrfmiddlewaretoken"' in page
    assert 'name="next" value="/streams/"' in page
    assert "do not match" not in page


def test_a_blocked_sign_in_page_does_not_keep_a_link_elsewhere(plain_user):
    client = Client()
    for _ in range(3):
        sign_in(client, "wrong")
    blocked = client.post(
        "/login/", {"username": "bob", "password": "x", "next": "https://evil.example/"}, REMOTE_ADDR="10.0.0.1"
    )
    assert blocked.status_code == 429
    assert "evil.example" not in blocked.content.decode()


def test_good_sign_ins_are_never_counted(plain_user):
    for _ in range(6):
        assert sign_in(Client(), "pw-bob-123").status_code == 302
    api = APIClient()
    for _ in range(6):
        assert api.post(TOKEN, {"username": "bob", "password": "pw-bob-123"}, format="json").status_code == 200


def test_failures_for_one_username_from_many_addresses_are_counted_together(plain_user):
    for i in range(3):
        sign_in(Client(), "wrong", addr=f"10.0.1.{i}")
    assert sign_in(Client(), "pw-bob-123", addr="10.0.2.1").status_code == 429
    assert sign_in(Client(), "anything", username="someone-else", addr="10.0.2.1").status_code == 200


def test_the_token_endpoint_is_limited_the_same_way(plain_user):
    api = APIClient()
    for _ in range(3):
        assert api.post(TOKEN, {"username": "BOB", "password": "x"}, format="json").status_code == 401
    response = api.post(TOKEN, {"username": "bob", "password": "pw-bob-123"}, format="json")
    assert response.status_code == 429
    assert response["Content-Type"] == "application/json"  # the API's error shape, not the page
    assert response.json()["code"] == "too_many_attempts"
    assert "try again in" in response.json()["message"]


def test_a_console_write_without_the_csrf_token_is_refused(operator_user, test_broker):
    stream = factories.make_stream(policy={"limit_type": "size", "min": 1})
    client = factories.console_client(operator_user, Client(enforce_csrf_checks=True))
    url = f"/streams/{stream.full_name}/retention/run/"
    assert client.post(url, HTTP_HX_REQUEST="true").status_code == 403
    assert not RetentionCycle.objects.exists()

    page = client.get(f"/streams/{stream.full_name}/")
    token = page.cookies["csrftoken"].value
    response = client.post(url, HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 200
    assert RetentionCycle.objects.get().trigger == "console"


def test_the_api_with_a_session_needs_the_csrf_token_too(operator_user):
    client = factories.console_client(operator_user, Client(enforce_csrf_checks=True))
    body = {"scope": "shop", "name": "orders"}
    response = client.post("/api/v1/streams/", body, content_type="application/json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["message"]
    assert not services.Stream.objects.exists()


def test_a_body_that_cannot_be_read_still_counts_against_the_address(plain_user, caplog):
    client = Client()
    for _ in range(3):
        response = client.post("/login/", b"--x--", content_type="multipart/form-data", REMOTE_ADDR="10.0.3.1")
        assert response.status_code in (200, 400)
    assert "did not answer" not in caplog.text
    assert sign_in(client, "pw-bob-123", addr="10.0.3.1").status_code == 429
