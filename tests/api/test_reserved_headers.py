"""Headers named `cbr-…` are the service's own (a dead letter's `cbr-dlq-*`, issue 37 point 4): a
publish that sets one, in any case, is refused with a 400 naming it, and nothing of the batch is
written; the service's own dead-letter appends still set theirs."""

import factories
import pytest
from rest_framework.test import APIClient

from domain.errors import FieldError
from domain.events import PublishLimits, parse_batch
from streams import logs

pytestmark = pytest.mark.django_db
EVENTS = "/api/v1/streams/shop/orders/events/"


@pytest.fixture
def stream(data_dir):
    return factories.make_stream("orders")


@pytest.mark.parametrize("name", ["cbr-dlq-offset", "cbr-dlq-stream", "CBR-DLQ-Reason", "Cbr-anything", "cbr-"])
def test_a_publish_that_sets_a_cbr_header_is_refused_naming_it_and_writes_nothing(api, stream, name):
    # given a stream with an event
    assert api.post(EVENTS, {"events": [{"payload": "kept"}]}, format="json").status_code == 201
    tail = logs.stream_log(stream).tail_cut()
    # when a batch holds an event with a header of the service's prefix, after a good one
    body = {"events": [{"payload": "fine"}, {"payload": "forged", "headers": {"type": "x", name: "notanint"}}]}
    answer = api.post(EVENTS, body, format="json")
    # then it is refused, naming the header, and neither event was written
    assert answer.status_code == 400, answer.content
    assert answer.json()["code"] == "invalid" and answer.json()["field"] == f"events[1].headers.{name}"
    assert "the service's own" in answer.json()["message"]
    assert logs.stream_log(stream).tail_cut() == tail
    assert [e["payload"] for e in api.get(EVENTS).json()["events"]] == ["kept"]


@pytest.mark.parametrize("name", ["cbr", "x-cbr-dlq-offset", "cbrdlq", "cb-r"])
def test_headers_that_only_look_alike_are_published(api, stream, name):
    answer = api.post(EVENTS, {"events": [{"payload": "x", "headers": {name: "1"}}]}, format="json")
    assert answer.status_code == 201, answer.content
    assert api.get(EVENTS).json()["events"][0]["headers"] == {name: "1"}


def test_a_publish_key_is_refused_as_everyone_is(operator_api, stream):
    made = operator_api.post(
        "/api/v1/api-keys/", {"name": "producer", "kind": "publish", "streams": ["shop/orders"]}, format="json"
    )
    producer = APIClient()
    producer.credentials(HTTP_AUTHORIZATION=f"Api-Key {made.json()['key']}")
    answer = producer.post(EVENTS, {"events": [{"payload": "x", "headers": {"cbr-dlq-offset": "1"}}]}, format="json")
    assert answer.status_code == 400 and answer.json()["field"] == "events[0].headers.cbr-dlq-offset"
    assert logs.stream_log(stream).tail_cut() == {"0": 0}


def test_the_rule_in_plain_python():
    limits = PublishLimits(max_event_bytes=1024, max_batch_events=10)
    with pytest.raises(FieldError) as refused:
        parse_batch({"events": [{"payload": "x", "headers": {"CbR-Dlq-At": "1"}}]}, limits, 0)
    assert refused.value.field == "events[0].headers.CbR-Dlq-At"
    assert parse_batch({"events": [{"payload": "x", "headers": {"dlq": "1"}}]}, limits, 0)[0].headers == {"dlq": "1"}
