"""A dead letter's `cbr-dlq-*` headers are the service's own (issue 37, point 4): a publish that
sets a `cbr-` header is refused, naming it, and writes nothing (the console's form here, the REST
publish in tests/api/test_reserved_headers.py); and events written before that rule, whose
`cbr-dlq-*` headers hold nonsense, are shown with them as plain headers on every page of the event
browser instead of answering 500 until retention removed them."""

import json
from urllib.parse import quote, unquote

import factories
import pytest
from page_text import text

from domain.dead_letters import read_dead_letter
from domain.events import EventIn
from streams import logs, services

pytestmark = pytest.mark.django_db

PAGE = "/streams/shop/orders/events/"
ORIGIN = {
    "cbr-dlq-reason": "bad order",
    "cbr-dlq-stream": "shop/orders",
    "cbr-dlq-segment": "0",
    "cbr-dlq-offset": "0",
    "cbr-dlq-reader-group": "shop/strict",
    "cbr-dlq-deliveries": "3",
    "cbr-dlq-at": "1795000000000",
}
FORGED = [
    {**ORIGIN, "cbr-dlq-offset": "notanint"},
    {**ORIGIN, "cbr-dlq-offset": "-1"},
    {**ORIGIN, "cbr-dlq-offset": "1e3"},
    {**ORIGIN, "cbr-dlq-offset": "\u0663"},  # an Arabic-Indic three: a digit to str.isdigit, to int()
    {**ORIGIN, "cbr-dlq-offset": "9" * 40},
    {**ORIGIN, "cbr-dlq-stream": "../../admin"},
    {**ORIGIN, "cbr-dlq-stream": "orders"},
    {**ORIGIN, "cbr-dlq-segment": "0/../1"},
    {"cbr-dlq-offset": "notanint"},
    {"cbr-dlq-stream": "shop/orders", "cbr-dlq-segment": "0"},
]


@pytest.fixture
def stream(data_dir):
    stream = factories.make_stream("orders")
    services.do_publish(stream, [EventIn(b"the original")])
    return stream


def forge(stream, headers: dict) -> None:
    """An event as one written before the `cbr-` prefix was reserved: straight into the store,
    past the publish's check."""
    services.do_publish(stream, [EventIn(b"forged", headers=headers)])


@pytest.mark.parametrize("headers", FORGED, ids=lambda h: "-".join(f"{k[8:]}={v[:12]}" for k, v in h.items()))
def test_nonsense_dead_letter_headers_are_shown_as_plain_headers_on_every_view(admin_client, stream, headers):
    # given an old event whose cbr-dlq-* headers do not describe where it came from
    forge(stream, headers)
    tail = logs.stream_log(stream).tail_cut()
    views = [PAGE, PAGE + "?format=json", PAGE + "?format=hex", PAGE + "?start=tail"]
    views.append(PAGE + "?start=cut&cut=" + quote(json.dumps({"0": 1})))  # where a dead letter's link points
    views.append(PAGE + "?start=time&time=2000-01-01T00:00")
    for url in views:
        # when it is browsed, in every form
        answer = admin_client.get(url)
        # then the page answers, and shows every one of those headers as it is, no dead letter
        assert answer.status_code == 200, url
        page = text(answer.content.decode())
        if "start=tail" in url:
            continue  # the tail holds no event
        assert "dead letter :" not in page, url
        for name, value in headers.items():
            assert f"{name} = {value}" in page, (url, name)
    assert logs.stream_log(stream).tail_cut() == tail
    read = factories.api_client(factories.make_user("reader")).get("/api/v1/streams/shop/orders/events/")
    assert read.status_code == 200 and read.json()["events"][1]["headers"] == headers


def test_a_dead_letter_that_parses_still_shows_its_origin_with_a_link_that_answers(admin_client, stream):
    # given a well-formed dead letter, and a stranger header of the prefix beside it
    forge(stream, {**ORIGIN, "cbr-dlq-extra": "x", "type": "order"})
    html = admin_client.get(PAGE).content.decode()
    page = text(html)
    # then its origin is shown apart, the rest as headers
    assert "dead letter : bad order" in page and "from shop/orders 0:0" in page
    assert "group shop/strict" in page and "3 deliveries" in page
    assert "cbr-dlq-extra = x" in page and "type = order" in page and "cbr-dlq-offset =" not in page
    # and its link leads to the origin's page, which answers
    link = unquote(html.split('href="/streams/shop/orders/events/?start=cut&amp;cut=')[1].split('"')[0])
    assert json.loads(link) == {"0": 0}
    answer = admin_client.get(PAGE + "?start=cut&cut=" + quote(link))
    assert answer.status_code == 200 and "the original" in text(answer.content.decode())


def test_a_count_that_does_not_parse_stays_a_plain_header_of_a_dead_letter(admin_client, stream):
    forge(stream, {**ORIGIN, "cbr-dlq-deliveries": "many", "cbr-dlq-at": "yesterday"})
    page = text(admin_client.get(PAGE).content.decode())
    assert "dead letter : bad order" in page and "deliveries ·" not in page
    assert "cbr-dlq-deliveries = many" in page and "cbr-dlq-at = yesterday" in page


@pytest.mark.parametrize("name", ["cbr-dlq-offset", "CBR-Anything", "cbr-"])
def test_the_console_refuses_to_publish_a_cbr_header_naming_it_and_writes_nothing(client, operator_user, stream, name):
    # given an operator at the browser
    operator = factories.console_client(operator_user, client)
    tail = logs.stream_log(stream).tail_cut()
    # when they publish an event with a header of the service's prefix
    answer = operator.post(PAGE + "publish/", {"payload": "forged by hand", "headers": f"a=1\n{name}=5"})
    # then it is refused, naming the header, with what was typed kept; nothing was written
    assert answer.status_code == 400
    page = text(answer.content.decode())
    assert f"Not published: headers.{name}: header names starting with 'cbr-' are the service's own" in page
    assert "forged by hand" in page
    assert logs.stream_log(stream).tail_cut() == tail


# -- the rule, in plain Python ------------------------------------------------------------------


def test_read_dead_letter_parses_the_origin_and_leaves_the_rest():
    dead, rest = read_dead_letter({**ORIGIN, "type": "order"})
    assert dead is not None
    assert (dead.stream, dead.segment, dead.offset, dead.reason) == ("shop/orders", "0", 0, "bad order")
    assert (dead.reader_group, dead.deliveries, dead.at_ms) == ("shop/strict", 3, 1795000000000)
    assert rest == {"type": "order"}


@pytest.mark.parametrize("headers", [*FORGED, {**ORIGIN, "cbr-dlq-offset": 7}, {**ORIGIN, "cbr-dlq-stream": None}])
def test_read_dead_letter_reads_nonsense_as_no_dead_letter(headers):
    assert read_dead_letter(headers) == (None, headers)


def test_read_dead_letter_of_no_headers():
    assert read_dead_letter(None) == (None, {}) and read_dead_letter({"a": "1"}) == (None, {"a": "1"})
