"""The console's API-keys page: operators make keys (shown once), revoke them; viewers don't
see it."""

from __future__ import annotations

import factories
import pytest
from page_text import text

from access.models import ApiKey

pytestmark = pytest.mark.django_db
URL = "/api-keys/"


@pytest.fixture
def operator(operator_user):
    client = factories.console_client(operator_user)
    factories.make_group(factories.make_stream())
    return client


def test_an_operator_makes_a_key_and_sees_it_once(operator):
    made = operator.post(
        URL, {"name": "billing-worker", "kind": "reader_group", "reader_group": "shop/billing"}, HTTP_HX_REQUEST="true"
    )
    assert made.status_code == 200
    key = ApiKey.objects.get()
    html = made.content.decode()
    assert "Copy this key now" in html and f"{key.prefix}." in html
    secret = html.split(f"{key.prefix}.")[1][:32]
    assert key.matches(f"{key.prefix}.{secret}")
    again = operator.get(URL).content.decode()
    assert key.prefix in again and secret not in again and "consume shop/billing" in text(again)


def test_a_bad_key_form_says_what_is_wrong_and_makes_nothing(operator):
    response = operator.post(
        URL, {"name": "p", "kind": "publish", "streams": "shop/orders, shop/nope"}, HTTP_HX_REQUEST="true"
    )
    assert "no stream shop/nope" in response.content.decode()
    assert not ApiKey.objects.exists()


def test_an_operator_revokes_a_key_from_the_page(operator):
    operator.post(URL, {"name": "p", "kind": "publish", "streams": "shop/orders"})
    key = ApiKey.objects.get()
    response = operator.post(f"/api-keys/{key.prefix}/revoke/", HTTP_HX_REQUEST="true")
    assert f"Key p ({key.prefix}) revoked" in response.content.decode()
    key.refresh_from_db()
    assert key.state == "revoked"


def test_a_viewer_neither_sees_nor_opens_the_page(plain_user):
    client = factories.console_client(plain_user)
    dashboard = client.get("/").content.decode()
    assert "API keys" not in dashboard and '<span class="chip grey">viewer</span>' in dashboard
    assert client.get(URL).status_code == 403
