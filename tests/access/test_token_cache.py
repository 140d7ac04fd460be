"""Token and API-key authentication remember a lookup for a few seconds per process, and never let
a deleted token, a revoked key or a deactivated user in afterwards (access/token_cache.py)."""

from __future__ import annotations

import factories
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from access.token_cache import forget_tokens
from streams import waking

pytestmark = pytest.mark.django_db
STREAMS = "/api/v1/streams/"


@pytest.fixture(autouse=True)
def empty_cache():
    factories.listening()  # what the process remembers counts only while its listener is subscribed
    forget_tokens()
    yield
    forget_tokens()


def _token_queries(queries) -> int:
    return sum(1 for q in queries if "authtoken_token" in q["sql"])


def test_a_second_request_with_the_same_token_does_not_look_the_key_up_again(api):
    # given
    assert api.get(STREAMS).status_code == 200
    # when
    with CaptureQueriesContext(connection) as ctx:
        answer = api.get(STREAMS)
    # then
    assert answer.status_code == 200
    assert _token_queries(ctx.captured_queries) == 0


def test_it_refuses_a_deleted_token_at_once(api, admin_user):
    # given
    assert api.get(STREAMS).status_code == 200
    # when
    Token.objects.filter(user=admin_user).get().delete()
    # then
    assert api.get(STREAMS).status_code == 401


def test_it_refuses_a_deactivated_user_at_once(api, admin_user):
    # given
    assert api.get(STREAMS).status_code == 200
    # when
    admin_user.is_active = False
    admin_user.save()
    # then
    answer = api.get(STREAMS)
    assert answer.status_code == 401


def test_it_follows_a_changed_role_at_once(user_api, plain_user):
    # given a viewer, who may not create streams
    assert user_api.post(STREAMS, {"scope": "s", "name": "a"}, format="json").status_code == 403
    # when
    plain_user.is_staff = True
    plain_user.save()
    # then
    assert user_api.post(STREAMS, {"scope": "s", "name": "a"}, format="json").status_code == 201


def test_an_unknown_token_is_refused_every_time(api):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert client.get(STREAMS).status_code == 401
    assert client.get(STREAMS).status_code == 401


def test_with_no_cache_every_request_looks_the_key_up(api, settings):
    # given
    settings.CBR_TOKEN_CACHE_S = 0
    assert api.get(STREAMS).status_code == 200
    # when
    with CaptureQueriesContext(connection) as ctx:
        assert api.get(STREAMS).status_code == 200
    # then
    assert _token_queries(ctx.captured_queries) == 1


def test_a_token_deleted_while_its_key_is_looked_up_is_not_remembered(api, admin_user, monkeypatch):
    # given a lookup that finds the token just before another thread of the process deletes it
    looked_up = TokenAuthentication.authenticate_credentials

    def racing(self, key):
        found = looked_up(self, key)
        Token.objects.filter(key=key).delete()  # what another request's thread does meanwhile
        return found

    monkeypatch.setattr(TokenAuthentication, "authenticate_credentials", racing)
    api.get(STREAMS)
    monkeypatch.setattr(TokenAuthentication, "authenticate_credentials", looked_up)
    # then the next request looks the key up again and is refused
    assert api.get(STREAMS).status_code == 401


def _api_key_queries(queries) -> int:
    return sum(1 for q in queries if "access_apikey" in q["sql"])


def test_a_second_request_with_the_same_api_key_does_not_look_it_up_again(operator_api):
    # given a reader group's key, used once
    factories.make_group(factories.make_stream())
    made = operator_api.post(
        "/api/v1/api-keys/", {"name": "w", "kind": "reader_group", "reader_group": "shop/billing"}, format="json"
    ).json()
    keyed = APIClient()
    keyed.credentials(HTTP_AUTHORIZATION=f"Api-Key {made['key']}")
    group = "/api/v1/reader-groups/shop/billing/"
    assert keyed.get(group).status_code == 200
    # when
    with CaptureQueriesContext(connection) as ctx:
        answer = keyed.get(group)
    # then
    assert answer.status_code == 200
    assert _api_key_queries(ctx.captured_queries) == 0
    # and revoked, it is refused at once
    assert operator_api.delete(f"/api/v1/api-keys/{made['prefix']}/").status_code == 204
    assert keyed.get(group).status_code == 401


def test_a_change_made_by_another_process_is_followed_at_once(api):
    # given a token remembered by this process
    assert api.get(STREAMS).status_code == 200
    # when another process saves a token, key or user (its signal says so on the channel)
    factories.changed_elsewhere("credentials")
    # then, once this process has heard it, it looks the token up again
    with CaptureQueriesContext(connection) as ctx:
        assert api.get(STREAMS).status_code == 200
    assert _token_queries(ctx.captured_queries) == 1


def test_nothing_is_remembered_while_the_change_channel_is_not_listened_to(api, monkeypatch):
    # given a token remembered while the listener was subscribed
    assert api.get(STREAMS).status_code == 200
    # when the listener loses its subscription (a change may go unheard)
    listener = waking.listener()
    monkeypatch.setattr(listener, "subscribed", False)
    # then every request looks its credential up
    with CaptureQueriesContext(connection) as ctx:
        assert api.get(STREAMS).status_code == 200
        assert api.get(STREAMS).status_code == 200
    assert _token_queries(ctx.captured_queries) == 2
    # and once subscribed again (a new epoch: what was remembered before is not trusted), it
    # remembers anew
    monkeypatch.setattr(listener, "subscribed", True)
    monkeypatch.setattr(listener, "epoch", listener.epoch + 2)
    with CaptureQueriesContext(connection) as ctx:
        assert api.get(STREAMS).status_code == 200
        assert api.get(STREAMS).status_code == 200
    assert _token_queries(ctx.captured_queries) == 1
