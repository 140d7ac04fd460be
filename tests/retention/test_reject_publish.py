"""`on_max_limit: reject_publish` (docs/design/retention.md): at its max, with the slowest subscriber still
needing the data, a stream refuses publishing with 507 instead of dropping unconsumed events; a
subscriber moving on gets the stream a cycle at once, which lets publishing resume."""

from datetime import UTC, datetime, timedelta

import factories
import pytest

from retention.cycle.lifecycle import execute
from retention.cycle.running import run_cycle
from retention.models import RetentionCycle, TruncationRecord
from streams import logs
from streams.models import Stream

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
EVENTS = "/api/v1/streams/shop/orders/events/"
CUT = "/api/v1/reader-groups/shop/billing/truncation-cut/"


def make_stream(on_max_limit):
    return factories.make_stream(
        on_max_limit=on_max_limit, policy={"limit_type": "size", "min": 30, "max": 90, "consumption_based": True}
    )


def fill_past_max(api, stream):
    """A subscriber at the head holds all 10 events (300 bytes) through two cycles."""
    factories.create_group_over_api(api, retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT", start="head")
    factories.publish(stream, 5, b"x" * 30)
    run_cycle(now=T0)
    factories.publish(stream, 5, b"x" * 30)
    return run_cycle(now=T0 + timedelta(hours=1))


def test_at_its_max_a_reject_publish_stream_refuses_events_and_keeps_the_unconsumed(api):
    stream = make_stream("reject_publish")
    (outcome,) = fill_past_max(api, stream)
    assert outcome.rule == "cbr:case-iii:slb:reject_publish" and outcome.truncation is None
    assert Stream.objects.get(pk=stream.pk).full_since == T0 + timedelta(hours=1)
    response = api.post(EVENTS, {"events": [{"payload": "more"}]}, format="json")
    assert response.status_code == 507, response.content
    assert response.json()["code"] == "stream_full" and response.json()["field"] == "stream"
    assert logs.stream_state(stream).event_count == 10  # nothing dropped, nothing added


def test_the_default_lets_the_max_win_and_never_refuses(api):
    stream = make_stream("truncate")
    (outcome,) = fill_past_max(api, stream)
    assert outcome.rule == "cbr:case-iii:limit_max"
    assert Stream.objects.get(pk=stream.pk).full_since is None
    assert api.post(EVENTS, {"events": [{"payload": "more"}]}, format="json").status_code == 201


def test_a_subscriber_moving_on_queues_a_cycle_that_reopens_the_stream(
    api, test_broker, django_capture_on_commit_callbacks
):
    stream = make_stream("reject_publish")
    fill_past_max(api, stream)
    tail = logs.stream_log(stream).tail_cut()
    with django_capture_on_commit_callbacks(execute=True):
        moved = api.post(CUT, {"stream": "shop/orders", "stream_cut": tail}, format="json")
    assert moved.status_code == 200, moved.content
    cycle = RetentionCycle.objects.get(stream=stream)
    assert (cycle.state, cycle.trigger) == ("queued", "api")
    execute(cycle)  # what the worker does with the queued task
    assert TruncationRecord.objects.get(stream=stream).rule == "cbr:case-ii:limit_min"
    assert Stream.objects.get(pk=stream.pk).full_since is None
    assert api.post(EVENTS, {"events": [{"payload": "more"}]}, format="json").status_code == 201


def test_an_ack_on_a_stream_that_is_not_full_queues_nothing(api, test_broker, django_capture_on_commit_callbacks):
    stream = make_stream("truncate")
    fill_past_max(api, stream)
    tail = logs.stream_log(stream).tail_cut()
    with django_capture_on_commit_callbacks(execute=True):
        api.post(CUT, {"stream": "shop/orders", "stream_cut": tail}, format="json")
    assert not RetentionCycle.objects.exists()
