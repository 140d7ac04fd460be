"""Times at the ends of the calendar (issue 37, point 5): `0001-01-01T00:00:00+14:00` is still year
0 in UTC, `9999-12-31T23:59:59-14:00` already year 10000; each parsed, then overflowed (a 500, or a
row that failed every later read of its page). Every place that takes a time from input refuses
them naming the field, and writes nothing: the API, the console's pages and forms, the command."""

import re
from urllib.parse import urlencode

import factories
import pytest
from django.core.management import CommandError, call_command
from page_text import text

from access.models import ApiKey
from groups.models import ReaderGroup
from retention.models import RetentionCycle
from streams import logs

pytestmark = pytest.mark.django_db

EDGES = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "9999-12-31T23:59:59.999999-00:01"]
OUTSIDE = "outside the times UTC can hold"
GROUPS = "/api/v1/reader-groups/"


@pytest.fixture
def stream(data_dir):
    stream = factories.make_stream("orders")
    factories.publish(stream, 3)
    return stream


def refused(answer, field: str) -> None:
    assert answer.status_code == 400, answer.content
    body = answer.json()
    assert body["code"] == "invalid" and body["field"] == field, body
    assert OUTSIDE in body["message"], body


@pytest.mark.parametrize("edge", EDGES)
def test_a_new_group_starting_at_an_edge_is_refused_naming_start_time(api, stream, edge):
    body = {"scope": "shop", "name": "billing", "streams": ["shop/orders"], "start": {"time": edge}}
    refused(api.post(GROUPS, body, format="json"), "start.time")
    assert not ReaderGroup.objects.exists()


@pytest.mark.parametrize("edge", EDGES)
def test_a_seek_to_an_edge_is_refused_naming_time_and_moves_nothing(api, stream, edge):
    factories.create_group_over_api(api)
    before = api.get(GROUPS + "shop/billing/").json()
    refused(api.post(GROUPS + "shop/billing/seek/", {"time": edge}, format="json"), "time")
    assert api.get(GROUPS + "shop/billing/").json()["generation"] == before["generation"]


@pytest.mark.parametrize("edge", EDGES)
def test_an_event_due_at_an_edge_is_refused_naming_deliver_at_and_not_written(api, stream, edge):
    tail = logs.stream_log(stream).tail_cut()
    body = {"events": [{"payload": "ok"}, {"payload": "x", "deliver_at": edge}]}
    refused(api.post("/api/v1/streams/shop/orders/events/", body, format="json"), "events[1].deliver_at")
    assert logs.stream_log(stream).tail_cut() == tail


@pytest.mark.parametrize("edge", EDGES)
def test_a_cycle_at_an_edge_is_refused_naming_now(api, stream, edge):
    refused(api.post("/api/v1/retention/cycles/", {"now": edge}, format="json"), "now")
    assert not RetentionCycle.objects.exists()


@pytest.mark.parametrize("edge", EDGES)
def test_a_key_expiring_at_an_edge_is_refused_naming_expires_at(operator_api, stream, edge):
    body = {"name": "producer", "kind": "publish", "streams": ["shop/orders"], "expires_at": edge}
    refused(operator_api.post("/api/v1/api-keys/", body, format="json"), "expires_at")
    assert not ApiKey.objects.exists() and operator_api.get("/api/v1/api-keys/").status_code == 200


# -- the console ---------------------------------------------------------------------------------


@pytest.mark.parametrize("edge", EDGES)
def test_the_event_browser_from_an_edge_is_a_400_naming_time(admin_client, stream, edge):
    answer = admin_client.get("/streams/shop/orders/events/?" + urlencode({"start": "time", "time": edge}))
    assert answer.status_code == 400
    assert re.search(rf"\btime : .*{OUTSIDE}", text(answer.content.decode()))


@pytest.fixture
def operator(operator_user):
    return factories.console_client(operator_user)


def errors_beside(html: str) -> list[str]:
    return [text(e) for e in re.findall(r'<ul class="errorlist">(.*?)</ul>', html, re.S)]


@pytest.mark.parametrize("edge", EDGES)
def test_the_group_form_refuses_a_start_at_an_edge_beside_its_field(operator, stream, edge):
    body = {
        "scope": "shop",
        "name": "billing",
        "streams": ["shop/orders"],
        "retention_type": "NONE",
        "start": "time",
        "start_time": edge,
        "ack_timeout_s": "45",
        "max_deliveries": "3",
        "on_poison": "skip",
        "ack_policy": "explicit",
        "max_ack_pending": "1000",
    }
    answer = operator.post("/reader-groups/new/", body)
    # the form again, the refusal beside the field (as every refusal of the console's forms)
    assert answer.status_code == 200
    html = answer.content.decode()
    beside = re.search(r'name="start_time"[^>]*aria-invalid="true".*?<ul class="errorlist">(.*?)</ul>', html, re.S)
    assert (
        beside and text(beside.group(1)) == f"{edge} is {OUTSIDE} (0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z)"
    )
    assert not ReaderGroup.objects.exists()


@pytest.mark.parametrize("edge", EDGES)
def test_the_seek_form_refuses_an_edge_naming_time(api, operator, stream, edge):
    factories.create_group_over_api(api)
    # the form's time is UTC (a datetime-local) and gets a Z; a hand-made request sends anything
    answer = operator.post("/reader-groups/shop/billing/seek/", {"to": "time", "time": edge}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200 and "Not moved: time " in text(answer.content.decode())
    assert ReaderGroup.objects.get().generation == 0


@pytest.mark.parametrize("edge", EDGES)
def test_the_key_form_refuses_an_expiry_at_an_edge_beside_its_field(operator, stream, edge):
    factories.make_group(stream)
    answer = operator.post(
        "/api-keys/", {"name": "w", "kind": "reader_group", "reader_group": "shop/billing", "expires_at": edge}
    )
    assert answer.status_code == 200 and any(OUTSIDE in e for e in errors_beside(answer.content.decode()))
    assert not ApiKey.objects.exists() and operator.get("/api-keys/").status_code == 200


# -- the command -------------------------------------------------------------------------------


@pytest.mark.parametrize("edge", EDGES)
def test_the_cycle_command_refuses_a_clock_at_an_edge(stream, edge):
    with pytest.raises(CommandError, match=f"--now: .*{OUTSIDE}"):
        call_command("run_retention_cycle", "--now", edge)
    assert not RetentionCycle.objects.exists()
