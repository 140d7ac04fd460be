"""A job asked for while the task queue (Celery's broker) is down: one rule (`streams.jobs`) for
retention cycles and compaction runs, from the API and from the console. The job's row is kept
and says failed, with why; the API answers 503 `broker_unavailable` (`Retry-After`); nothing is
left "queued" that no worker will run. The same requests with the broker up queue the job."""

import socket

import factories
import pytest
from page_text import text

from cbrweb.celery import app
from compaction.models import CompactionRun
from retention.models import RetentionCycle

pytestmark = pytest.mark.django_db

CYCLES = "/api/v1/retention/cycles/"
COMPACTIONS = "/api/v1/streams/shop/profiles/compactions/"


def _forget_connections() -> None:
    """Celery keeps its connections to the broker it first met; the next task opens new ones
    to `broker_url` as it is now (what Celery itself does after a fork)."""
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def broker_down(test_broker):
    """Celery's broker is a port where nothing listens, for the test."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app.conf.broker_url = f"redis://127.0.0.1:{port}/0"
    _forget_connections()
    yield
    app.conf.broker_url = test_broker
    _forget_connections()


def _streams(api):
    factories.make_stream(policy={"limit_type": "size", "min": 1})
    factories.create_stream_over_api(api, "profiles", cleanup_policy="compact")


def test_the_api_answers_503_and_the_cycle_and_the_run_say_failed(api, broker_down):
    _streams(api)
    for url, body in ((CYCLES, {"stream": "shop/orders"}), (COMPACTIONS, None)):
        answer = api.post(url, body, format="json")
        assert answer.status_code == 503, answer.content
        assert answer.json()["code"] == "broker_unavailable" and answer["Retry-After"] == "1"
    cycle, run = RetentionCycle.objects.get(), CompactionRun.objects.get()
    for job in (cycle, run):
        assert job.state == "failed" and job.error.startswith("the task queue did not take it: ")
    assert api.get(CYCLES).json()["results"][0]["state"] == "failed"
    assert api.get(COMPACTIONS).json()["results"][0]["state"] == "failed"


def test_the_console_shows_the_job_failed(api, admin_client, broker_down):
    _streams(api)
    page = admin_client.post("/streams/shop/profiles/compaction/run/", HTTP_HX_REQUEST="true")
    assert "could not be queued: the task queue did not take it: " in text(page.content.decode())
    admin_client.post("/streams/shop/orders/retention/run/", HTTP_HX_REQUEST="true")
    assert RetentionCycle.objects.get().state == "failed"
    assert CompactionRun.objects.get().state == "failed"


def test_with_the_broker_up_the_same_requests_queue_the_jobs(api, test_broker):
    _streams(api)
    assert api.post(CYCLES, {"stream": "shop/orders"}, format="json").status_code == 201
    assert api.post(COMPACTIONS).status_code == 202
    assert RetentionCycle.objects.get().state == "queued" and CompactionRun.objects.get().state == "queued"
