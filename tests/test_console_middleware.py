"""An API call with its own credentials is answered without the console's middleware (sessions,
the signed-in user, messages, htmx); everything else goes through it as before
(cbrweb/console_middleware.py)."""

from __future__ import annotations

import factories
import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db
STREAMS = "/api/v1/streams/"


def test_an_api_call_with_a_token_goes_without_the_session(api):
    # when
    answer = api.get(STREAMS)
    # then
    assert answer.status_code == 200
    assert not hasattr(answer.wsgi_request, "session")
    assert "sessionid" not in answer.cookies


def test_a_publish_with_an_api_key_goes_without_the_session(operator_api):
    # given
    factories.make_stream()
    body = {"name": "p", "kind": "publish", "streams": ["shop/orders"]}
    made = operator_api.post("/api/v1/api-keys/", body, format="json").json()
    keyed = APIClient()
    keyed.credentials(HTTP_AUTHORIZATION=f"api-key {made['key']}")  # the keyword in any case
    # when
    answer = keyed.post("/api/v1/streams/shop/orders/events/", {"events": [{"payload": "x"}]}, format="json")
    # then
    assert answer.status_code == 201
    assert not hasattr(answer.wsgi_request, "session")


def test_a_signed_in_browser_s_api_call_still_has_its_session(client, admin_user):
    # given
    client.force_login(admin_user)
    # when
    answer = client.get(STREAMS)
    # then
    assert answer.status_code == 200
    assert hasattr(answer.wsgi_request, "session")


def test_an_api_call_with_another_scheme_is_authenticated_by_its_session(client, admin_user):
    # given a signed-in browser that also sends a header that is no token nor key
    client.force_login(admin_user)
    # when
    answer = client.get(STREAMS, HTTP_AUTHORIZATION="Bearer something")
    # then
    assert answer.status_code == 200
    assert hasattr(answer.wsgi_request, "session")


def test_a_console_page_keeps_its_middleware_whatever_the_header(client, admin_user):
    # given
    client.force_login(admin_user)
    token = Token.objects.get_or_create(user=admin_user)[0].key
    # when
    answer = client.get("/", HTTP_AUTHORIZATION=f"Token {token}")
    # then
    assert answer.status_code == 200
    assert hasattr(answer.wsgi_request, "session") and hasattr(answer.wsgi_request, "htmx")
