"""Shared test factories (issue 22): the users, clients, streams, reader groups and events that many
test files make, made one way. `import factories` (tests/ is on the import path, pytest.ini).

Two kinds: the `make_*`/`publish` ones go through the services directly (fast, no HTTP), the
`*_over_api` ones go through the REST API with an authenticated client and check its answer;
`subscribe` writes a subscriber's acknowledgement cut straight to its rows.
Defaults are the ones most tests use: scope "shop", stream "orders" of one segment, reader group
"billing". A test that needs something else passes it."""

from __future__ import annotations

import re
import time

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from domain.events import EventIn
from domain.policy_spec import PolicySpec, parse_policy
from groups import reader_groups
from groups.models import ReaderGroup, Subscription
from retention import services as retention_services
from store.redis_connection import get_redis
from store.store import key_space_position
from streams import services, wait_stats, waking
from streams.logs import stream_log
from streams.models import Stream

ROLES = ("viewer", "operator", "admin")


# --- users and clients -------------------------------------------------------------------------


def make_user(username: str, role: str = "viewer", *, password: str | None = None):
    """A user in one of the roles of docs/security.md: a viewer (no role group), an operator (in
    the "operator" group) or an admin (staff and superuser). The password is `pw-<username>-123`
    unless given."""
    if role not in ROLES:
        raise ValueError(f"role {role!r} is none of {ROLES}")
    admin = role == "admin"
    user = get_user_model().objects.create_user(
        username, password=password or f"pw-{username}-123", is_staff=admin, is_superuser=admin
    )
    if role == "operator":
        # get_or_create: a flush (transactional tests) empties the table the migration filled
        user.groups.add(Group.objects.get_or_create(name="operator")[0])
    return user


def token_for(user) -> str:
    """The user's API token (made on first use)."""
    return Token.objects.get_or_create(user=user)[0].key


def api_client(user) -> APIClient:
    """An API client authenticated with the user's token."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    return client


def console_client(user, client: Client | None = None) -> Client:
    """A console (browser-like) client signed in as the user: `client` if given, else a new one."""
    client = client if client is not None else Client()
    client.force_login(user)
    return client


# --- streams, reader groups and events through the services -----------------------------------


def make_stream(
    name: str = "orders",
    *,
    scope: str = "shop",
    segment_count: int = 1,
    policy: dict | PolicySpec | None = None,
    **fields,
) -> Stream:
    """A stream made by the services, with a retention policy if given (a dict as the API takes
    it, or a parsed PolicySpec); `fields` are the other settings (cleanup_policy, on_max_limit,
    delayed_index, compaction, …)."""
    if policy is None:
        return services.do_create_stream(scope=scope, name=name, segment_count=segment_count, **fields)
    if isinstance(policy, dict):
        policy = parse_policy(policy)
    return retention_services.do_create_stream(
        scope=scope, name=name, segment_count=segment_count, policy=policy, **fields
    )


def publish(stream: Stream, count: int, payload: bytes = b"x", *, routing_key: bytes | None = None):
    """`count` events of the same payload (`publish(stream, 7, b"x" * 30)`: seven of 30 bytes) in
    one batch; returns their positions."""
    return services.do_publish(stream, [EventIn(payload, routing_key=routing_key)] * count)


def routing_key_for(stream: Stream, segment: str) -> bytes:
    """A routing key the stream routes to `segment`."""
    log = stream_log(stream)
    return next(k for k in (f"k{i}".encode() for i in range(10_000)) if log.route(k) == segment)


def make_group(
    *streams: Stream, name: str = "billing", scope: str = "shop", retention_type: str = "NONE", **config
) -> ReaderGroup:
    """A reader group made by the services, subscribed to `streams`; `config` is its other
    settings (ack_timeout_s, max_deliveries, …)."""
    return reader_groups.do_create_reader_group(
        scope=scope, name=name, streams=list(streams), retention_type=retention_type, **config
    )


def subscribe(stream: Stream, group: str, cut: dict[str, int], *, acknowledged_at=None) -> Subscription:
    """Reader group `group` of the stream's scope (a MANUAL_RELEASE_AT_USER_STREAMCUT one, made if
    new) subscribed to `stream` with its acknowledgement cut at `cut`, acknowledged at
    `acknowledged_at` (now unless given): a subscriber holding data back, written straight to
    the rows as a released cut leaves them (the retention tests; nothing is read or acked).
    Called again, it moves the cut."""
    reader_group, _ = ReaderGroup.objects.get_or_create(
        scope=stream.scope, name=group, defaults={"retention_type": "MANUAL_RELEASE_AT_USER_STREAMCUT"}
    )
    return Subscription.objects.update_or_create(
        reader_group=reader_group,
        stream=stream,
        defaults={
            "acknowledgement_cut": cut,
            "acknowledged_at": timezone.now() if acknowledged_at is None else acknowledged_at,
        },
    )[0]


# --- the same through the REST API --------------------------------------------------------------


def create_stream_over_api(api, name: str = "orders", *, scope: str = "shop", **body) -> Stream:
    """POST /api/v1/streams/ (one segment unless `segment_count` is given), which must answer 201;
    returns the stream's row."""
    answer = api.post("/api/v1/streams/", {"scope": scope, "name": name, "segment_count": 1, **body}, format="json")
    assert answer.status_code == 201, answer.content
    return Stream.objects.get(scope__name=scope, name=name)


def create_group_over_api(api, name: str = "billing", *, scope: str = "shop", streams=("shop/orders",), **body) -> dict:
    """POST /api/v1/reader-groups/, which must answer 201; returns the group as answered."""
    answer = api.post(
        "/api/v1/reader-groups/", {"scope": scope, "name": name, "streams": list(streams), **body}, format="json"
    )
    assert answer.status_code == 201, answer.content
    return answer.json()


def publish_over_api(api, events: list[dict], *, stream: str = "shop/orders") -> dict:
    """POST the events (dicts as the API takes them) to `stream` ("scope/name"), which must answer
    201; returns the answer (the positions)."""
    answer = api.post(f"/api/v1/streams/{stream}/events/", {"events": events}, format="json")
    assert answer.status_code == 201, answer.content
    return answer.json()


def key_in(lo: float, hi: float) -> str:
    """A routing key whose place on the key space is in [lo, hi)."""
    return next(k for k in (f"k{i}" for i in range(100_000)) if lo <= key_space_position(k.encode()) < hi)


def put_in_range(api, lo: float, hi: float, count: int, *, stream: str = "shop/orders") -> None:
    """`count` one-byte events over the API, with a routing key of [lo, hi)."""
    publish_over_api(api, [{"routing_key": key_in(lo, hi), "payload": "x"}] * count, stream=stream)


def scale_over_api(api, seal: list[str], new_ranges: list[list[float]], *, stream: str = "shop/orders") -> dict:
    """POST …/scale/, which must answer 200; returns the answer."""
    answer = api.post(f"/api/v1/streams/{stream}/scale/", {"seal": seal, "new_ranges": new_ranges}, format="json")
    assert answer.status_code == 200, answer.json()
    return answer.json()


def release_over_api(api, group: str, cut: dict, *, scope: str = "shop", stream: str = "shop/orders"):
    """POST a MANUAL group's truncation cut; returns the answer (the caller checks it)."""
    return api.post(
        f"/api/v1/reader-groups/{scope}/{group}/truncation-cut/", {"stream": stream, "stream_cut": cut}, format="json"
    )


def listening():
    """The process's wake-up listener (`streams.waking`), once it is subscribed: what waiting reads
    and the process's memos (`streams.memo`) rely on."""
    listener = waking.listener()
    deadline = time.monotonic() + 10
    while not listener.healthy and time.monotonic() < deadline:
        time.sleep(0.01)
    assert listener.healthy
    return listener


def changed_elsewhere(memo: str) -> None:
    """What another process says when it changes what `memo` reads (`streams.memo`): the message
    on the change channel, returning once this process's listener has heard it."""
    listener = listening()
    heard = listener.changes[memo]
    client = get_redis()
    client.publish(waking.changed_channel(client), memo)
    deadline = time.monotonic() + 10
    while listener.changes[memo] == heard and time.monotonic() < deadline:
        time.sleep(0.001)
    assert listener.changes[memo] > heard


def rate_limited_total(api, limit: str) -> float:
    """`cbr_rate_limited_total{limit}` as /metrics says it, after this process's counts are in
    Redis (as the web process puts them every second)."""
    wait_stats.flush(get_redis(), None)
    found = re.search(rf'^cbr_rate_limited_total{{limit="{limit}"}} (\S+)$', api.get("/metrics").content.decode(), re.M)
    assert found is not None
    return float(found.group(1))
