"""A web process remembers the stream a publish looked up (streams/lookups.py, `streams.memo`)
and looks it up again as soon as anything a publish reads of it changes: a stream marked full by
a retention cycle, a stream deleted, a change another process made (heard on the change channel),
and never while its listener is not subscribed."""

from datetime import UTC, datetime, timedelta

import factories
import pytest
import redis as redis_lib
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from retention.cycle.running import run_cycle
from streams import waking
from streams.lookups import forget_streams
from streams.models import Stream

pytestmark = pytest.mark.django_db
EVENTS = "/api/v1/streams/shop/orders/events/"
T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def listened():
    factories.listening()
    forget_streams()


def lookups(api, payload="e") -> tuple[int, int]:
    """A one-event publish: its status, and how many times it read the streams table."""
    with CaptureQueriesContext(connection) as ctx:
        status = api.post(EVENTS, {"events": [{"payload": payload}]}, format="json").status_code
    return status, sum(1 for q in ctx.captured_queries if "streams_stream" in q["sql"])


def test_a_publish_after_the_first_does_not_look_its_stream_up_again(api):
    factories.make_stream()
    assert lookups(api) == (201, 1)
    assert lookups(api) == (201, 0)
    assert lookups(api) == (201, 0)


def test_a_stream_a_cycle_marks_full_refuses_the_next_publish_at_once(api):
    # given a stream remembered by this process, with a subscriber holding everything
    stream = factories.make_stream(
        on_max_limit="reject_publish", policy={"limit_type": "size", "min": 30, "max": 90, "consumption_based": True}
    )
    factories.create_group_over_api(api, retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT", start="head")
    assert lookups(api) == (201, 1)
    # when a retention cycle finds it at its max and marks it full
    factories.publish(stream, 5, b"x" * 30)
    run_cycle(now=T0)
    factories.publish(stream, 5, b"x" * 30)
    run_cycle(now=T0 + timedelta(hours=1))  # (the second cycle finds it past its max)
    assert Stream.objects.get(pk=stream.pk).full_since is not None
    assert lookups(api)[0] == 507


def test_a_deleted_stream_is_not_published_to(api, django_capture_on_commit_callbacks):
    factories.make_stream()
    assert lookups(api) == (201, 1)
    with django_capture_on_commit_callbacks(execute=True):
        assert api.delete("/api/v1/streams/shop/orders/").status_code == 204
    assert lookups(api)[0] == 404


def test_a_change_another_process_made_is_followed_once_heard(api):
    stream = factories.make_stream(
        on_max_limit="reject_publish", policy={"limit_type": "size", "min": 1, "max": 10, "consumption_based": True}
    )
    assert lookups(api) == (201, 1)
    # another process marks the stream full and says so on the change channel
    Stream.objects.filter(pk=stream.pk).update(full_since=timezone.now())
    assert lookups(api) == (201, 0)  # not heard yet: the update said nothing
    factories.changed_elsewhere("streams")
    assert lookups(api) == (507, 1)


def test_nothing_is_remembered_while_the_listener_is_not_subscribed_or_when_told_not_to(api, monkeypatch, settings):
    factories.make_stream()
    assert lookups(api) == (201, 1)
    monkeypatch.setattr(waking.listener(), "subscribed", False)
    assert [lookups(api) for _ in range(2)] == [(201, 1), (201, 1)]
    monkeypatch.undo()
    settings.CBR_STREAM_CACHE_S = 0
    assert [lookups(api) for _ in range(2)] == [(201, 1), (201, 1)]


def test_a_change_said_among_another_redis_databases_processes_is_not_heard(api, redis_url):
    # pub/sub ignores databases: another service (or test process) on the same Redis server, with
    # a database of its own, says its changes on its own channel
    factories.make_stream()
    assert lookups(api) == (201, 1)
    base, _, db = redis_url.rpartition("/")
    other = redis_lib.Redis.from_url(f"{base}/{(int(db or 0) + 7) % 16}")
    other.publish(waking.changed_channel(other), "streams")
    factories.changed_elsewhere("credentials")  # a message of this database after it: both heard by now
    assert lookups(api) == (201, 0)  # the other database's change made nobody here forget
    factories.changed_elsewhere("streams")
    assert lookups(api) == (201, 1)
