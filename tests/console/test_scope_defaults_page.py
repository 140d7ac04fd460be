"""The console's scope-defaults page: what a scope gives its streams, edited by operators (a blank
field has no default, a refusal shown beside its field, removal after a confirmation), each
stream of the scope with what it takes; viewers read it."""

import factories
import pytest
from page_text import text

from streams.models import Stream

pytestmark = pytest.mark.django_db
PAGE = "/scopes/shop/defaults/"
FORM = {
    "limit_type": "time",
    "min": "3600",
    "max": "",
    "consumption_based": "on",
    "cleanup_policy": "compact",
    "delete_retention_s": "600",
}


def test_an_operator_sets_defaults_and_the_streams_follow(admin_client, api):
    factories.create_stream_over_api(api, "plain")
    factories.create_stream_over_api(api, "own", retention_policy={"limit_type": "size", "min": 5})

    answer = admin_client.post(PAGE, FORM, HTTP_HX_REQUEST="true")

    page = text(answer.content.decode())
    assert "Defaults saved: the streams that take them follow now." in page
    assert "shop/plain retention_policy cleanup_policy delete_retention_s" in page
    assert "shop/own cleanup_policy delete_retention_s" in page
    plain = Stream.objects.select_related("retention_policy").get(name="plain")
    assert (plain.cleanup_policy, plain.delete_retention_s, plain.retention_policy.min_value) == ("compact", 600, 3600)
    assert api.get("/api/v1/scopes/shop/defaults/").json()["retention_policy"]["consumption_based"] is True
    stream_page = text(admin_client.get("/streams/shop/plain/").content.decode())
    assert "from scope shop" in stream_page


def test_a_refused_default_is_shown_beside_its_field_and_nothing_changes(admin_client, api):
    factories.create_stream_over_api(api, "plain")
    answer = admin_client.post(PAGE, {**FORM, "min": "-5"}, HTTP_HX_REQUEST="true")
    page = text(answer.content.decode())
    assert "Not saved: see the fields." in page and "Min must not be negative" in page
    assert api.get("/api/v1/scopes/shop/defaults/").json()["retention_policy"] is None
    assert Stream.objects.get(name="plain").cleanup_policy == "delete"


def test_defaults_are_removed_after_a_confirmation(admin_client, api):
    factories.create_stream_over_api(api, "plain")
    admin_client.post(PAGE, FORM)
    assert 'hx-confirm="Remove every default of shop?' in admin_client.get(PAGE).content.decode()
    answer = admin_client.post(PAGE + "clear/", HTTP_HX_REQUEST="true")
    assert "Defaults removed." in text(answer.content.decode())
    assert Stream.objects.get(name="plain").cleanup_policy == "delete"
    assert admin_client.post(PAGE + "clear/").status_code == 302  # without JavaScript: back to the page


def test_a_viewer_reads_the_defaults_without_a_form(client, plain_user, api):
    factories.create_stream_over_api(api, "plain")
    api.put("/api/v1/scopes/shop/defaults/", {"cleanup_policy": "compact"}, format="json")
    client.force_login(plain_user)
    page = client.get(PAGE).content.decode()
    assert "Save defaults" not in page and "cleanup_policy" in text(page)
    assert client.post(PAGE, FORM).status_code == 403
    assert client.get("/scopes/nowhere/defaults/").status_code == 404
