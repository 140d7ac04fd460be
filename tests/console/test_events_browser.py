"""The console's event browser: pages of a stream from its head, tail, a time or a cut, filtered
by routing key or key, payloads as text, pretty JSON or hex; dead letters with their reason and
origin; the publish form; and the paging under a filter, which neither skips nor repeats."""

import json
import re
from urllib.parse import unquote

import factories
import pytest
from page_text import rows, text

from console.browse_views import hex_rows
from domain.events import EventIn
from streams import logs, services
from streams.browsing import browse

pytestmark = pytest.mark.django_db

PAGE = "/streams/shop/orders/events/"


@pytest.fixture
def stream(data_dir):
    stream = factories.make_stream("orders", segment_count=2)
    services.do_publish(
        stream,
        [
            EventIn(
                b'{"order": 1, "state": "created"}',
                routing_key=b"customer-7",
                key=b"order-1",
                headers={"type": "created"},
            ),
            EventIn(b"plain text", routing_key=b"customer-8", key=b"order-2"),
            EventIn(b"\xff\x00\xfe", routing_key=b"customer-7", key=b"order-3"),
        ],
    )
    return stream


def payloads(html: str) -> list[str]:
    return [r[-1] for r in rows(html) if len(r) == 5]


def test_the_browser_shows_each_event_with_its_fields(admin_client, stream):
    html = admin_client.get(PAGE).content.decode()
    shown = payloads(html)
    assert len(shown) == 3
    assert '{"order": 1, "state": "created"} 32 bytes' in shown
    assert "00000000 ff 00 fe |...| 3 bytes, not text" in shown
    page = text(html)
    assert "customer-7 key order-1" in page and "type = created" in page
    pretty = admin_client.get(PAGE + "?format=json").content.decode()
    assert "{\n  &quot;order&quot;: 1,\n  &quot;state&quot;: &quot;created&quot;\n}" in pretty
    assert "70 6c 61 69 6e 20 74 65 78 74" in text(admin_client.get(PAGE + "?format=hex").content.decode())


def test_filters_and_starting_points(admin_client, stream):
    only_7 = text(admin_client.get(PAGE + "?routing_key=customer-7").content.decode())
    assert "2 events of 3 examined" in only_7 and "plain text" not in only_7
    by_key = payloads(admin_client.get(PAGE + "?key=order-2").content.decode())
    assert by_key == ["plain text 10 bytes"]
    assert "at the tail" in text(admin_client.get(PAGE + "?start=tail").content.decode())
    assert payloads(admin_client.get(PAGE + "?start=tail").content.decode()) == []
    assert len(payloads(admin_client.get(PAGE + "?start=time&time=2000-01-01T00:00").content.decode())) == 3
    assert len(payloads(admin_client.get(PAGE + "?start=time&time=2999-01-01T00:00").content.decode())) == 0


def test_bad_starting_points_are_a_400_naming_the_field(admin_client, stream):
    for query, field in (
        ("start=cut&cut=nope", "cut"),
        ("start=cut&cut=%7B%229%22:0%7D", "cut"),
        ("start=time&time=soon", "time"),
    ):
        answer = admin_client.get(PAGE + "?" + query)
        assert answer.status_code == 400, query
        assert re.search(rf"\b{field}(\.\d+)? : ", text(answer.content.decode())), query
        assert "Next page" not in text(answer.content.decode())


def test_paging_under_a_filter_neither_skips_nor_repeats(stream):
    services.do_publish(stream, [EventIn(f"e{i}".encode(), key=f"k{i % 3}".encode()) for i in range(300)])
    wanted = [f"e{i}" for i in range(300) if i % 3 == 1]
    seen, cut = [], {}
    for _ in range(100):
        page = browse(stream, cut, 7, key="k1", budget=40)
        seen += [e["payload"] for e in page.events]
        cut = page.next_cut
        if page.at_tail:
            break
    assert sorted(seen, key=lambda p: int(p[1:])) == wanted and len(seen) == len(set(seen))


def test_headers_may_be_written_name_colon_value_and_a_refusal_keeps_the_input_beside_its_field(
    client, operator_user, stream
):
    operator = factories.console_client(operator_user)
    tail = logs.stream_log(stream).tail_cut()

    # a line that is neither name=value nor name: value: refused beside the headers, all kept
    refused = operator.post(
        PAGE + "publish/",
        {"payload": "kept as typed", "routing_key": "customer-3", "headers": "type: created\nno separator"},
    )
    assert refused.status_code == 400 and logs.stream_log(stream).tail_cut() == tail
    html = refused.content.decode()
    headers_field = html[html.index('id="headers"') : html.index('for="delay_ms"')]
    assert "Not published: headers: &#x27;no separator&#x27; is not name=value (or name: value)" in headers_field
    assert "type: created\nno separator</textarea>" in headers_field
    assert ">kept as typed</textarea>" in html and 'value="customer-3"' in html

    # then name: value, with a value holding the other separator, is published as name=value would be
    answer = operator.post(
        PAGE + "publish/", {"payload": "p", "headers": "type: created\nat: 12:00\nquery=a=b\nurl = http://x/?a=1"}
    )
    assert answer.status_code == 302
    records, _ = logs.stream_log(stream).read({}, 100)
    (event,) = [r.record for r in records if r.record.payload == b"p"]
    assert event.headers == {"type": "created", "at": "12:00", "query": "a=b", "url": "http://x/?a=1"}


def test_an_operator_publishes_from_the_browser_and_a_viewer_may_not(client, operator_user, plain_user, stream):
    operator = factories.console_client(operator_user)
    answer = operator.post(
        PAGE + "publish/", {"payload": "typed by hand", "routing_key": "customer-9", "headers": "a=1\nb = 2"}
    )
    assert answer.status_code == 302
    page = operator.get(answer["Location"]).content.decode()
    assert "Published at segment" in text(page) and payloads(page)[0] == "typed by hand 13 bytes"
    assert "a = 1" in text(page) and "b = 2" in text(page)
    refused = operator.post(PAGE + "publish/", {"payload": "x", "delay_ms": "soon"})
    assert refused.status_code == 400 and "Not published: delay_ms: must be a whole number" in text(
        refused.content.decode()
    )
    viewer = factories.console_client(plain_user)
    assert viewer.post(PAGE + "publish/", {"payload": "nope"}).status_code == 403
    assert "Publish an event" not in viewer.get(PAGE).content.decode()
    assert len(payloads(operator.get(PAGE).content.decode())) == 4


def test_a_dead_letter_shows_its_reason_and_where_it_came_from(admin_client, api, stream):
    factories.create_group_over_api(api, "strict", max_deliveries=1, on_poison="dead_letter")
    g = "/api/v1/reader-groups/shop/strict/"
    ids = [d["delivery_id"] for d in api.post(g + "read/", {"max_events": 1}, format="json").json()["deliveries"]]
    api.post(g + "nack/", {"delivery_ids": ids, "reason": "bad order"}, format="json")
    api.post(g + "read/", {"max_events": 10}, format="json")  # the poison goes to the dead-letter stream
    page = text(admin_client.get("/streams/shop/orders-dlq/events/").content.decode())
    assert "dead letter : bad order" in page, page and "from shop/orders" in page and "group shop/strict" in page
    html = admin_client.get("/streams/shop/orders-dlq/events/").content.decode()
    origin = json.loads(unquote(html.split("/streams/shop/orders/events/?start=cut&amp;cut=")[1].split('"')[0]))
    assert len(origin) == 1 and list(origin.values())[0] == 0


def test_hex_is_shown_in_rows_of_offset_bytes_and_ascii_that_line_up():
    rows = hex_rows(b'{"order": 1, "state": "created"}\xff\x00').splitlines()
    assert rows == [
        '00000000  7b 22 6f 72 64 65 72 22  3a 20 31 2c 20 22 73 74  |{"order": 1, "st|',
        '00000010  61 74 65 22 3a 20 22 63  72 65 61 74 65 64 22 7d  |ate": "created"}|',
        "00000020  ff 00                                             |..|",
    ]
    assert len({row.index("|") for row in rows}) == 1  # the ASCII column lines up
    assert hex_rows(b"") == ""


def test_the_browser_searches_by_text_header_and_json_and_the_next_page_keeps_the_search(admin_client, data_dir):
    stream = services.do_create_stream(scope="shop", name="search", segment_count=1)
    services.do_publish(
        stream,
        [
            EventIn(f'{{"n": {n}, "amount": {n * 10}}}'.encode(), headers={"region": "eu" if n % 2 else "us"})
            for n in range(30)
        ],
    )
    page = admin_client.get("/streams/shop/search/events/?json=$.amount>=200&header=region:eu&contains=amount")
    html = page.content.decode()
    shown = payloads(html)
    assert len(shown) == 5 and all('"n": 2' in p for p in shown)  # 21, 23, 25, 27, 29
    assert "of 30 examined" in text(html)
    next_link = re.search(r'href="(\?start=cut[^"]+)"', html).group(1).replace("&amp;", "&")
    assert "json=%24.amount%3E%3D200" in next_link and "header=region%3Aeu" in next_link
    # the export links take the page's start and filters; they answer what the page shows, and more
    export = re.search(r'href="(/api/v1/streams/shop/search/events/export/\?[^"]+format=jsonl)"', html).group(1)
    exported = b"".join(admin_client.get(export.replace("&amp;", "&")).streaming_content).splitlines()
    assert [json.loads(json.loads(line)["payload"])["n"] for line in exported] == [21, 23, 25, 27, 29]
    refused = admin_client.get("/streams/shop/search/events/?json=amount>1")
    assert refused.status_code == 400 and "json" in text(refused.content.decode())


def test_a_large_event_is_shown_by_its_size_with_a_download_that_a_signed_in_person_can_follow(admin_client, stream):
    body = bytes(range(256)) * 4000
    raw = admin_client.generic(
        "POST",
        "/api/v1/streams/shop/orders/events/raw/?routing_key=customer-9",
        body,
        content_type="application/octet-stream",
    )
    assert raw.status_code == 201, raw.content
    url = raw.json()["positions"][0]["payload_url"]
    html = admin_client.get(PAGE).content.decode()
    assert [p for p in payloads(html) if p.startswith("large event")] == [
        "large event Download 1000.0 KiB, served by its own URL"
    ]
    assert f'href="{url}"' in html
    assert b"".join(admin_client.get(url).streaming_content) == body  # the console's session is enough
