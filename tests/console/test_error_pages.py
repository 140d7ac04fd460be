"""Dead ends have a way out: the console's 404 and 403 are pages with the navigation, saying what
was missing or refused (naming the stream or group asked for); a 500 is a page of its own; the
API's 404 names what it did not find."""

import factories
import pytest
from django.test import RequestFactory
from page_text import text

from api.errors import api_aware_500
from streams import services

pytestmark = pytest.mark.django_db


def test_an_unknown_address_is_a_page_with_the_navigation(admin_client):
    answer = admin_client.get("/no/such/page/")
    page = answer.content.decode()
    assert answer.status_code == 404
    assert "Nothing is at /no/such/page/." in text(page)
    assert 'href="/streams/"' in page and 'href="/reader-groups/"' in page and "Log out" in page


def test_a_missing_stream_or_group_is_named(admin_client, data_dir):
    services.do_create_stream(scope="shop", name="orders", segment_count=1)
    for url, said in (
        ("/streams/shop/nope/", "No stream shop/nope."),
        ("/streams/shop/nope/events/", "No stream shop/nope."),
        ("/reader-groups/shop/billing/", "No reader group shop/billing."),
        ("/scopes/elsewhere/defaults/", "No scope elsewhere."),
    ):
        answer = admin_client.get(url)
        assert answer.status_code == 404 and said in text(answer.content.decode()), url


def test_the_api_names_what_it_did_not_find(api, data_dir):
    stream = api.get("/api/v1/streams/shop/nope/")
    assert stream.status_code == 404 and stream.json() == {"code": "not_found", "message": "no stream shop/nope"}
    group = api.get("/api/v1/reader-groups/shop/billing/")
    assert group.json()["message"] == "no reader group shop/billing"
    assert api.get("/api/v1/retention/cycles/987654/").json()["message"] == "no retention cycle 987654"


def test_a_refusal_is_a_page_that_says_why(client, plain_user):
    factories.console_client(plain_user, client)
    answer = client.get("/streams/new/")
    page = answer.content.decode()
    assert answer.status_code == 403
    assert "Your role (viewer) may not manage streams." in text(page) and 'href="/streams/"' in page


def test_a_server_error_is_a_page_of_its_own():
    answer = api_aware_500(RequestFactory().get("/streams/"))
    assert answer.status_code == 500 and "The server failed on this request." in text(answer.content.decode())
