"""Every endpoint × every kind of caller, allowed or refused, from one table (docs/security.md).

The table below is written out by hand, not derived from access.rules, so a wrong rule fails
here. An endpoint (URL name and method) the project serves that the table does not name fails
`test_the_matrix_names_every_endpoint`, so a new endpoint cannot ship without a decided entry.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse
from django_celery_beat.models import IntervalSchedule, PeriodicTask
from rest_framework.authtoken.models import Token

from access.models import ApiKey
from access.services import check_key_request, do_create_key, do_revoke_key
from domain.events import parse_batch
from domain.policy_spec import parse_policy
from groups import consuming, reader_groups
from retention import services as retention_services
from retention.models import RetentionCycle
from streams import logs, services

pytestmark = pytest.mark.django_db

KEYS = {"group_key", "other_group_key", "publish_key", "other_publish_key", "revoked_key"}
PEOPLE = {"viewer", "operator", "admin"}
CALLERS = {"anonymous"} | PEOPLE | KEYS
OPERATORS = {"operator", "admin"}
ADMINS = {"admin"}
PUBLIC = CALLERS - {"revoked_key"}  # a bad credential is refused even where none is needed

MATRIX: dict[tuple[str, str], set[str]] = {
    # REST API
    ("api-token", "POST"): PUBLIC,
    ("api-schema", "GET"): PUBLIC,
    ("api-docs", "GET"): PUBLIC,
    ("api-streams", "GET"): PEOPLE,
    ("api-streams", "POST"): OPERATORS,
    ("api-stream", "GET"): PEOPLE,
    ("api-stream", "PATCH"): OPERATORS,
    ("api-stream", "DELETE"): ADMINS,
    ("api-policy", "GET"): PEOPLE,
    ("api-policy", "PUT"): OPERATORS,
    ("api-events", "GET"): PEOPLE,
    ("api-export", "GET"): PEOPLE,
    ("api-events", "POST"): OPERATORS | {"publish_key"},
    ("api-events-raw", "POST"): OPERATORS | {"publish_key"},
    ("api-event-payload", "GET"): PEOPLE | {"group_key"},  # a key of a group that reads the stream
    ("api-truncate", "POST"): ADMINS,
    ("api-purge", "POST"): ADMINS,
    ("api-republish", "POST"): OPERATORS,
    ("api-truncations", "GET"): PEOPLE,
    ("api-retention-set", "GET"): PEOPLE,
    ("api-compacted", "GET"): PEOPLE,
    ("api-compactions", "GET"): PEOPLE,
    ("api-compactions", "POST"): OPERATORS,
    ("api-reader-groups", "GET"): PEOPLE,
    ("api-reader-groups", "POST"): OPERATORS,
    ("api-reader-group", "GET"): PEOPLE | {"group_key"},
    ("api-reader-group", "PATCH"): OPERATORS,
    ("api-reader-group", "DELETE"): OPERATORS,
    ("api-truncation-cut", "POST"): OPERATORS | {"group_key"},
    ("api-read", "POST"): OPERATORS | {"group_key"},
    ("api-many-reads", "POST"): OPERATORS | KEYS - {"publish_key", "other_publish_key", "revoked_key"},
    ("api-ack", "POST"): OPERATORS | {"group_key"},
    ("api-nack", "POST"): OPERATORS | {"group_key"},
    ("api-consumers", "GET"): PEOPLE | {"group_key"},
    ("api-checkpoints", "GET"): PEOPLE | {"group_key"},
    ("api-checkpoints", "POST"): OPERATORS | {"group_key"},
    ("api-checkpoint-release", "POST"): OPERATORS | {"group_key"},
    ("api-checkpoint", "GET"): PEOPLE | {"group_key"},
    ("api-checkpoint", "DELETE"): OPERATORS | {"group_key"},
    ("api-seek", "POST"): OPERATORS,
    ("api-seal", "POST"): OPERATORS,
    ("api-offload", "POST"): OPERATORS,
    ("api-scale", "POST"): OPERATORS,
    ("api-scalings", "GET"): PEOPLE,
    ("api-scaling-policy", "PUT"): OPERATORS,
    ("api-scope-defaults", "GET"): PEOPLE,
    ("api-scope-defaults", "PUT"): OPERATORS,
    ("api-scope-defaults", "DELETE"): OPERATORS,
    ("api-keys", "GET"): OPERATORS,
    ("api-keys", "POST"): OPERATORS,
    ("api-key", "GET"): OPERATORS,
    ("api-key", "DELETE"): OPERATORS,
    ("api-cycles", "GET"): PEOPLE,
    ("api-cycles", "POST"): OPERATORS,
    ("api-cycle", "GET"): PEOPLE,
    ("metrics", "GET"): CALLERS,
    ("healthz", "GET"): CALLERS,  # for load balancers and probes: no authentication, nothing secret
    ("readyz", "GET"): CALLERS,
    # console (a signed-in person; keys are for the API and open nothing here)
    ("login", "GET"): CALLERS,
    ("logout", "POST"): CALLERS,
    ("console:dashboard", "GET"): PEOPLE,
    ("console:streams", "GET"): PEOPLE,
    ("console:stream", "GET"): PEOPLE,
    ("console:policy", "GET"): PEOPLE,
    ("console:policy", "POST"): OPERATORS,
    ("console:delayed", "GET"): PEOPLE,
    ("console:segments", "GET"): PEOPLE,
    ("console:segments", "POST"): OPERATORS,
    ("console:scaling-policy", "POST"): OPERATORS,
    ("console:compaction", "GET"): PEOPLE,
    ("console:compact-now", "POST"): OPERATORS,
    ("console:run-retention", "POST"): OPERATORS,
    ("console:cycle", "GET"): PEOPLE,
    ("console:jobs", "GET"): PEOPLE,
    ("console:schedules", "GET"): PEOPLE,
    ("console:schedule-edit", "POST"): OPERATORS,
    ("console:reader-groups", "GET"): PEOPLE,
    ("console:reader-group", "GET"): PEOPLE,
    ("console:reader-group-seek", "POST"): OPERATORS,
    ("console:checkpoint-delete", "POST"): OPERATORS,
    ("console:checkpoint-now", "POST"): OPERATORS,
    ("console:checkpoint-release", "POST"): OPERATORS,
    ("console:scope-defaults", "GET"): PEOPLE,
    ("console:scope-defaults", "POST"): OPERATORS,
    ("console:scope-defaults-clear", "POST"): OPERATORS,
    ("console:stream-events", "GET"): PEOPLE,
    ("console:stream-publish", "POST"): OPERATORS,
    ("console:stream-republish", "POST"): OPERATORS,
    ("console:stream-new", "GET"): OPERATORS,
    ("console:stream-new", "POST"): OPERATORS,
    ("console:stream-settings", "GET"): OPERATORS,
    ("console:stream-settings", "POST"): OPERATORS,
    ("console:stream-purge", "GET"): ADMINS,
    ("console:stream-purge", "POST"): ADMINS,
    ("console:stream-delete", "GET"): ADMINS,
    ("console:stream-delete", "POST"): ADMINS,
    ("console:reader-group-new", "GET"): OPERATORS,
    ("console:reader-group-new", "POST"): OPERATORS,
    ("console:reader-group-settings", "GET"): OPERATORS,
    ("console:reader-group-settings", "POST"): OPERATORS,
    ("console:reader-group-delete", "GET"): OPERATORS,
    ("console:reader-group-delete", "POST"): OPERATORS,
    ("console:password", "GET"): PEOPLE,
    ("console:password", "POST"): PEOPLE,
    ("console:api-keys", "GET"): OPERATORS,
    ("console:api-keys", "POST"): OPERATORS,
    ("console:api-key-revoke", "POST"): OPERATORS,
}
NOT_IN_MATRIX = ("admin:",)  # Django's admin: staff only, by Django itself
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def served_endpoints() -> set[tuple[str, str]]:
    """(URL name, method) of every route: DRF views by their handlers, console pages by the
    access table console_access gives them, other functions by the matrix's own entry."""
    found = set()

    def walk(patterns, namespace=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, f"{namespace}{p.namespace}:" if p.namespace else namespace)
            elif isinstance(p, URLPattern) and p.name:
                name = namespace + p.name
                if name.startswith(NOT_IN_MATRIX):
                    continue
                view = p.callback
                if hasattr(view, "cls"):
                    found.update((name, m) for m in METHODS if hasattr(view.cls, m.lower()))
                elif hasattr(view, "access"):
                    found.update((name, m) for m in view.access)
                else:
                    found.update({e for e in MATRIX if e[0] == name} or {(name, "?")})

    walk(get_resolver().url_patterns)
    return found


def test_the_matrix_names_every_endpoint():
    served = served_endpoints()
    assert served - set(MATRIX) == set(), "endpoints without an entry in the authorization matrix"
    assert set(MATRIX) - served == set(), "matrix entries for endpoints that are not served"


@pytest.fixture
def world(django_user_model, test_broker):
    """Two streams, two reader groups, a checkpoint, a cycle, and a caller of every kind."""
    policy = parse_policy({"limit_type": "size", "min": 1})
    stream = retention_services.do_create_stream(scope="m", name="s", policy=policy)
    other = services.do_create_stream(scope="m", name="other-s")
    services.do_publish(stream, parse_batch({"events": [{"payload": "x"}]}, logs.publish_limits(stream), 0))
    group = reader_groups.do_create_reader_group(
        scope="m", name="g", streams=[stream], retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT"
    )
    reader_groups.do_create_reader_group(scope="m", name="other-g", streams=[other], retention_type="NONE")
    consuming.do_checkpoint(group, "cp1", persist=True)
    cycle = RetentionCycle.objects.create(trigger="api", stream=stream)
    every_minute, _ = IntervalSchedule.objects.get_or_create(every=60, period=IntervalSchedule.SECONDS)
    schedule = PeriodicTask.objects.create(name="matrix", task="streams.tasks.seal_due_chunks", interval=every_minute)

    tokens, keys = {}, {}
    for name, role in (("viewer", None), ("operator", "operator"), ("admin", None)):
        user = django_user_model.objects.create_user(name, password="pw-matrix-1", is_staff=name == "admin")
        if role:
            user.groups.add(Group.objects.get_or_create(name=role)[0])  # a flush (transactional tests) empties it
        tokens[name] = (user, Token.objects.create(user=user).key)
    for name, body in {
        "group_key": {"kind": "reader_group", "reader_group": "m/g"},
        "other_group_key": {"kind": "reader_group", "reader_group": "m/other-g"},
        "publish_key": {"kind": "publish", "streams": ["m/s"]},
        "other_publish_key": {"kind": "publish", "streams": ["m/other-s"]},
        "revoked_key": {"kind": "reader_group", "reader_group": "m/g"},
    }.items():
        api_key, keys[name] = do_create_key(check_key_request(name=name, **body))
        if name == "revoked_key":
            do_revoke_key(api_key)
    return {"tokens": tokens, "keys": keys, "cycle": cycle, "schedule": schedule}


GROUP_ROUTES = {
    "api-reader-group",
    "api-truncation-cut",
    "api-read",
    "api-ack",
    "api-nack",
    "api-checkpoints",
    "api-consumers",
    "api-seek",
    "console:reader-group",
    "console:reader-group-seek",
    "console:reader-group-settings",
    "console:checkpoint-now",
    "console:reader-group-delete",
}


def url_of(name: str, world) -> str:
    prefix = ApiKey.objects.get(name="other_group_key").prefix
    kwargs = {
        "api-checkpoint-release": {"scope": "m", "name": "g", "checkpoint": "cp1"},
        "api-checkpoint": {"scope": "m", "name": "g", "checkpoint": "cp1"},
        "console:checkpoint-delete": {"scope": "m", "name": "g", "checkpoint": "cp1"},
        "console:checkpoint-release": {"scope": "m", "name": "g", "checkpoint": "cp1"},
        "api-scope-defaults": {"scope": "m"},
        "console:scope-defaults": {"scope": "m"},
        "console:scope-defaults-clear": {"scope": "m"},
        "api-cycle": {"pk": world["cycle"].pk},
        "console:cycle": {"pk": world["cycle"].pk},
        "console:schedule-edit": {"pk": world["schedule"].pk},
        "api-key": {"prefix": prefix},
        "api-event-payload": {"scope": "m", "name": "s", "segment": "0", "offset": 0},
        "console:api-key-revoke": {"prefix": prefix},
    }.get(name)
    if kwargs is None:
        try:
            return reverse(name)
        except NoReverseMatch:  # a route about one reader group or one stream
            kwargs = {"scope": "m", "name": "g" if name in GROUP_ROUTES else "s"}
    return reverse(name, kwargs=kwargs)


def call(caller: str, method: str, url: str, world):
    client = Client()
    headers = {}
    if caller in PEOPLE:
        user, token = world["tokens"][caller]
        if url.startswith("/api/v1/"):
            headers["HTTP_AUTHORIZATION"] = f"Token {token}"
        else:
            client.force_login(user)
    elif caller in KEYS:
        headers["HTTP_AUTHORIZATION"] = f"Api-Key {world['keys'][caller]}"
    return client.generic(method, url, data=b"{}", content_type="application/json", **headers)


def refused(response, url: str) -> bool:
    if url.startswith("/api/v1/") or url in ("/metrics", reverse("logout")):
        return response.status_code in (401, 403)
    login = response.status_code == 302 and response["Location"].startswith(reverse("login"))
    return response.status_code in (401, 403) or login


@pytest.mark.parametrize("caller", sorted(CALLERS))
@pytest.mark.parametrize("endpoint", sorted(MATRIX), ids=lambda e: f"{e[1]} {e[0]}")
def test_each_caller_is_allowed_or_refused_as_the_matrix_says(endpoint, caller, world):
    name, method = endpoint
    url = url_of(name, world)
    response = call(caller, method, url, world)
    if caller in MATRIX[endpoint]:
        assert not refused(response, url), f"{caller} was refused {method} {url}: {response.status_code}"
        not_ready = name == "readyz" and response.status_code == 503  # its answer while no worker runs here
        assert response.status_code < 500 or not_ready, response.content[:300]
    else:
        assert refused(response, url), f"{caller} was let through {method} {url}: {response.status_code}"
        if url.startswith("/api/v1/"):
            expected = 401 if caller in ("anonymous", "revoked_key") else 403
            assert response.status_code == expected
            if response["Content-Type"] == "application/json":
                assert response.json()["code"] in ("not_authenticated", "permission_denied", "authentication_failed")
