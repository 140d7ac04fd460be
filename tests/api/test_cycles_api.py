from datetime import UTC, datetime, timedelta

import factories
import pytest
from django.core.management import CommandError, call_command

from retention.models import RetentionCycle, TruncationRecord

pytestmark = pytest.mark.django_db

URL = "/api/v1/retention/cycles/"


def test_only_admins_queue_a_cycle(user_api):
    assert user_api.post(URL, {}, format="json").status_code == 403
    assert not RetentionCycle.objects.exists()


@pytest.mark.parametrize(
    "body, status, field",
    [
        ({"now": "yesterday"}, 400, "now"),
        ({"stream": "no-slash"}, 400, "stream"),
        ({"stream": "shop/nope"}, 404, "stream"),
        ({"stream": "shop/no-policy"}, 404, "stream"),
        ({"colour": "red"}, 400, "colour"),
    ],
)
def test_a_bad_cycle_request_names_the_field_and_queues_nothing(api, body, status, field):
    factories.make_stream("no-policy")
    response = api.post(URL, body, format="json")
    assert response.status_code == status, response.content
    assert response.json()["field"] == field
    assert not RetentionCycle.objects.exists()


def test_a_cycle_shows_its_state_and_progress(api, user_api):
    stream = factories.make_stream(policy={"limit_type": "size", "min": 1})
    cycle = RetentionCycle.objects.create(
        trigger="api", stream=stream, state="running", streams_done=1, streams_total=4
    )
    body = user_api.get(f"{URL}{cycle.pk}/").json()
    assert body["state"] == "running" and body["progress"] == 0.25 and body["stream"] == "shop/orders"
    assert user_api.get(URL).json()["count"] == 1
    assert api.get(f"{URL}999/").status_code == 404


def test_only_admins_choose_a_cycles_clock(operator_api):
    answer = operator_api.post(URL, {"now": "2026-01-01T00:00:00Z"}, format="json")
    assert answer.status_code == 403, answer.content
    assert answer.json()["field"] == "now"
    assert not RetentionCycle.objects.exists()


def test_a_clock_in_the_future_or_behind_the_history_is_refused_and_queues_nothing(api, test_broker):
    stream = factories.make_stream(policy={"limit_type": "size", "min": 1})
    latest = datetime.now(UTC) - timedelta(days=2)
    TruncationRecord.objects.create(
        stream=stream,
        created_at=latest,
        before_cut={"0": 0},
        after_cut={"0": 0},
        before_size=0,
        after_size=0,
        rule="manual",
        trigger="api",
    )
    ahead = datetime.now(UTC) + timedelta(days=365)
    behind = latest - timedelta(hours=1)
    for when, says in ((ahead, "in the future"), (behind, "before the latest truncation")):
        answer = api.post(URL, {"stream": "shop/orders", "now": when.isoformat()}, format="json")
        assert answer.status_code == 400, answer.content
        assert answer.json()["field"] == "now" and says in answer.json()["message"]
    assert not RetentionCycle.objects.exists()
    # a replay between the latest truncation and now is an admin's to run
    between = latest + timedelta(hours=1)
    answer = api.post(URL, {"stream": "shop/orders", "now": between.isoformat()}, format="json")
    assert answer.status_code == 201, answer.content
    assert RetentionCycle.objects.get().clock == between


def test_the_command_refuses_a_clock_in_the_future():
    factories.make_stream(policy={"limit_type": "size", "min": 1})
    with pytest.raises(CommandError, match="in the future"):
        call_command("run_retention_cycle", "--now", "2099-01-01T00:00:00Z")
    assert not RetentionCycle.objects.exists()
