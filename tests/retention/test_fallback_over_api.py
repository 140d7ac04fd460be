"""PDP-47's fallback timeline through the REST API: a subscriber holds while active, holds nothing
once stale (`subscriber_timeout_s` after its last cut, x), the limits alone decide only
`fallback_after_s` (y) after that, and a subscriber that publishes a cut again holds again.
Cycles run over REST with an admin's clock, inline (what a worker would do with the queued task)."""

import time
from datetime import UTC, datetime, timedelta

import factories
import pytest

from cbrweb.celery import app

pytestmark = pytest.mark.django_db
CYCLES = "/api/v1/retention/cycles/"
STREAM = "/api/v1/streams/shop/orders/"
GROUP = "/api/v1/reader-groups/shop/billing/"


@pytest.fixture
def cycles_run_inline(settings):
    settings.CBR_RETENTION_INTERVAL = 0.1  # each cycle records the tail
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


def test_the_fallback_waits_x_then_y_and_a_returning_subscriber_holds_again(api, cycles_run_inline):
    # given a consumption-based stream with x = 1 s and y = 1 s, and one subscriber
    policy = {
        "limit_type": "size",
        "min": 1,
        "consumption_based": True,
        "subscriber_timeout_s": 1,
        "fallback_after_s": 1,
    }
    factories.create_stream_over_api(api, retention_policy=policy)
    factories.create_group_over_api(api, retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT")
    factories.publish_over_api(api, [{"payload": "x"}] * 5)

    def cycle(at: datetime) -> dict:
        answer = api.post(CYCLES, {"stream": "shop/orders", "now": at.isoformat()}, format="json")
        assert answer.status_code == 201, answer.content
        done = api.get(f"{CYCLES}{answer.json()['id']}/").json()
        assert done["state"] == "done", done
        return done

    def release(cut: int) -> datetime:
        answer = api.post(GROUP + "truncation-cut/", {"stream": "shop/orders", "stream_cut": {"0": cut}}, format="json")
        assert answer.status_code == 200, answer.content
        (stream,) = api.get(GROUP).json()["streams"]
        return datetime.fromisoformat(stream["acknowledged_at"])

    def head() -> int:
        return api.get(STREAM).json()["head_cut"]["0"]

    def rules() -> list[str]:
        return [t["rule"] for t in api.get(STREAM + "truncations/").json()["results"]]

    # the retention set's first record, the tail at 5; the subscriber holds at its start (head)
    assert cycle(datetime.now(UTC) - timedelta(seconds=30))["truncations"] == 0
    acked = release(2)
    factories.publish_over_api(api, [{"payload": "x"}] * 5)

    # when the subscriber is active, it holds at its cut
    assert cycle(acked + timedelta(seconds=0.5))["truncations"] == 1
    assert head() == 2 and rules() == ["cbr:case-i:slb"]
    # stale from x on: it holds nothing, and nothing is truncated while y runs
    assert cycle(acked + timedelta(seconds=1.5))["truncations"] == 0
    assert cycle(acked + timedelta(seconds=1.9))["truncations"] == 0  # 1.9 s after the cut: only 0.9 of y
    assert head() == 2
    # x + y after the cut: the limits alone (the newest record keeping at least min: the tail at 5)
    fell_back = acked + timedelta(seconds=2.1)
    assert cycle(fell_back)["truncations"] == 1
    assert head() == 5 and rules() == ["cbr:fallback:limit_min", "cbr:case-i:slb"]

    # then the subscriber comes back: once it publishes a cut, it holds again
    while datetime.now(acked.tzinfo) < fell_back - timedelta(seconds=0.5):
        time.sleep(0.05)  # its cut must be younger than x at the next cycle, which may not go back
    factories.publish_over_api(api, [{"payload": "x"}] * 5)
    returned = release(7)
    assert cycle(max(returned, fell_back) + timedelta(seconds=0.2))["truncations"] == 1
    assert head() == 7 and rules()[0] == "cbr:case-i:slb"  # at its cut, not at the limits' (the tail)
