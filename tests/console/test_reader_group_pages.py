"""The reader-group pages of the console and their series on /metrics: the numbers a person sees
after consuming over REST (docs/design/acks.md), against the real segment store and Redis."""

import re

import factories
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from page_text import row_of, rows, text

from domain.events import EventIn
from groups import consuming
from groups.models import ReaderGroup
from retention.services import do_truncate
from store.redis_connection import get_redis
from streams import services, wait_stats

pytestmark = pytest.mark.django_db

API = "/api/v1/reader-groups/"
G = API + "shop/billing/"
PAGE = "/reader-groups/shop/billing/"


@pytest.fixture
def stream():
    """One segment of ten events; event i carries (i + 1) * 10 bytes (550 in all)."""
    stream = factories.make_stream()
    services.do_publish(stream, [EventIn(b"x" * ((i + 1) * 10)) for i in range(10)])
    return stream


def create(api, name="billing", **body):
    """A reader group over REST, released at its last checkpoint unless told otherwise."""
    return factories.create_group_over_api(
        api, name, **{"retention_type": "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT", **body}
    )


def read(api, n, group=G):
    response = api.post(group + "read/", {"max_events": n}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["deliveries"]


def ack(api, deliveries, group=G):
    response = api.post(group + "ack/", {"delivery_ids": [d["delivery_id"] for d in deliveries]}, format="json")
    assert response.status_code == 200, response.content


def nack(api, deliveries, group=G):
    response = api.post(group + "nack/", {"delivery_ids": [d["delivery_id"] for d in deliveries]}, format="json")
    assert response.status_code == 200, response.content


SEGMENT_COLUMNS = [
    "segment",
    "floor",
    "head",
    "tail",
    "lag_events",
    "lag_bytes",
    "pending",
    "waiting",
    "redelivered",
    "dead_lettered",
    "skipped",
    "missed",
]


def segment_row(html: str, segment: str = "0") -> dict[str, str]:
    cells = next(r for r in rows(html) if len(r) == len(SEGMENT_COLUMNS) and r[0].split()[0] == segment)
    return dict(zip(SEGMENT_COLUMNS, cells, strict=True))


def test_reader_group_pages_need_a_login(client):
    for url in ("/reader-groups/", PAGE):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_list_shows_each_group_with_its_lag_pending_and_last_checkpoint(admin_client, api, stream):
    # given: billing read 6 of 10 events and acknowledged the first 4; audit read nothing
    create(api)
    create(api, name="audit", retention_type="NONE")
    got = read(api, 6)
    ack(api, got[:4])  # an AUTOMATIC group's first ack is its first checkpoint
    # when
    html = admin_client.get("/reader-groups/").content.decode()
    # then: group, type, streams, lag (events), pending, status, last checkpoint
    *billing, checkpoint = row_of(html, "shop/billing")
    assert billing == ["shop/billing", "automatic", "shop/orders", "6", "2", "ok"]
    # a checkpoint made just now: "now", or seconds ago on a machine slow enough to take one
    assert checkpoint == "now" or re.fullmatch(r"(a|\d+) seconds? ago", checkpoint), checkpoint
    assert row_of(html, "shop/audit") == ["shop/audit", "none", "shop/orders", "10", "0", "ok", "never"]
    assert 'href="/reader-groups/shop/billing/"' in html and 'href="/streams/shop/orders/"' in html
    assert "2 reader groups" in text(html)


def test_the_list_flags_a_halted_group_in_red(admin_client, api, stream):
    create(api, max_deliveries=1, on_poison="halt")
    nack(api, read(api, 1))
    assert read(api, 5) == []  # offset 0 is out of deliveries: the group halts there
    html = admin_client.get("/reader-groups/").content.decode()
    assert row_of(html, "shop/billing")[5] == "halted"
    assert 'class="chip bad" title="shop/orders segment 0 at offset 0">halted</span>' in html


def test_the_list_table_is_sent_alone_to_htmx_and_polls(admin_client, api, stream):
    create(api)
    fragment = admin_client.get("/reader-groups/", HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="group-table"') and "<html" not in fragment
    assert 'hx-trigger="every 5s"' in fragment and row_of(fragment, "shop/billing")[3] == "10"


def test_the_group_page_shows_floor_and_lag_in_events_and_bytes(admin_client, api, stream):
    # given: 6 of 10 events handed out, the first 4 acknowledged
    create(api)
    got = read(api, 6)
    ack(api, got[:4])
    # when
    html = admin_client.get(PAGE).content.decode()
    # then: the floor is at 4; events 4..9 are lag: (5 + 6 + … + 10) * 10 = 450 bytes
    assert segment_row(html) == {
        "segment": "0",
        "floor": "4",
        "head": "0",
        "tail": "10",
        "lag_events": "6",
        "lag_bytes": "450 bytes",
        "pending": "2",
        "waiting": "0",
        "redelivered": "0",
        "dead_lettered": "0",
        "skipped": "0",
        "missed": "0",
    }
    page = text(html)
    assert "Lag (events) 6 from the floor" in page and "Lag (bytes) 450 bytes" in page
    assert "Pending 2 live deliveries, at most 1,000" in page
    # the acknowledgement cut the automatic checkpoint published, and its age
    assert "Acknowledgement cut 0:4 active Acknowledged now" in page
    assert "no dead letters" in page


def test_the_group_page_shows_the_settings_and_the_latest_checkpoints(admin_client, api, stream):
    create(
        api,
        ack_timeout_s=90,
        max_deliveries=3,
        on_poison="skip",
        max_ack_pending=50,
        checkpoint_interval_s=600,
        sinks=["search", "audit"],
        backoff_s=[1, 2.5, 60],
    )
    response = api.post(G + "checkpoints/", {"name": "before-deploy", "persist": True}, format="json")
    assert response.status_code == 201, response.content
    page = text(admin_client.get(PAGE).content.decode())
    assert (
        "Retention type AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT Dispatch rate no limit Subscriber timeout each stream's policy Generation 0 Start head Sinks audit search "
        "Checkpoint interval 10 min Last checkpoint now Ack policy explicit (at-least-once) Delivery shared (competing consumers over every segment) Ack timeout 1 min 30 s "
        "Backoff 1 s → 2.5 s → 60 s Max deliveries 3 On poison skip Max ack pending 50"
    ) in page
    assert "before-deploy persisted now shop/orders 0:0" in page


def test_a_group_that_is_not_a_subscriber_says_its_cut_holds_nothing(admin_client, api, stream):
    create(api, retention_type="NONE")
    page = text(admin_client.get(PAGE).content.decode())
    assert "Acknowledgement cut — not a subscriber (retention type NONE): its positions hold no data back" in page
    assert "Acknowledged" not in page
    assert "Checkpoint interval — only AUTOMATIC groups checkpoint by themselves" in page


def test_lag_starts_at_the_head_once_truncation_passed_the_floor(admin_client, api, stream):
    create(api, retention_type="NONE")
    ack(api, read(api, 4))
    do_truncate(stream, {"0": 6}, rule="manual", trigger="console")
    row = segment_row(admin_client.get(PAGE).content.decode())
    # events 6..9 are left: (7 + 8 + 9 + 10) * 10 bytes
    assert (row["floor"], row["head"], row["lag_events"], row["lag_bytes"]) == ("4", "6", "4", "340 bytes")


def test_the_positions_refresh_themselves_through_htmx(admin_client, api, stream):
    create(api)
    html = admin_client.get(PAGE).content.decode()
    assert '<div id="group-positions" hx-get="/reader-groups/shop/billing/" hx-trigger="every 3s"' in html
    ack(api, read(api, 3))
    fragment = admin_client.get(PAGE, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="group-positions"') and 'hx-trigger="every 3s"' in fragment
    assert "<html" not in fragment and "Settings" not in fragment
    row = segment_row(fragment)
    assert (row["floor"], row["lag_events"], row["lag_bytes"]) == ("3", "7", "490 bytes")


def test_a_halted_group_shows_the_poison_banner(admin_client, api, stream):
    # given: offsets 0..2 handed out, 0 and 1 acknowledged, 2 given back with one delivery allowed
    create(api, max_deliveries=1, on_poison="halt")
    got = read(api, 3)
    ack(api, got[:2])
    nack(api, got[2:])
    assert read(api, 10) == []
    # when
    html = admin_client.get(PAGE).content.decode()
    # then
    assert 'class="notice warn" role="alert"' in html
    assert "halted at offset 2 of shop/orders segment 0: change on_poison or raise max_deliveries to resume" in text(
        html
    )
    row = segment_row(html)
    assert (row["segment"], row["floor"], row["lag_events"]) == ("0 halted at 2", "2", "8")
    # a policy change and a read resume it: the banner goes
    group = api.get(G).json()
    response = api.patch(G, {"on_poison": "skip", "generation": group["generation"]}, format="json")
    assert response.status_code == 200, response.content
    read(api, 10)
    html = admin_client.get(PAGE).content.decode()
    assert "halted at offset" not in html and segment_row(html)["skipped"] == "1"


def test_the_group_page_links_the_dead_letter_stream_once_it_exists(admin_client, api, stream):
    create(api, max_deliveries=2)
    nack(api, read(api, 1))
    nack(api, read(api, 1))  # the second delivery of offset 0, given back again
    assert "no dead letters" in admin_client.get(PAGE).content.decode()
    assert [d["offset"] for d in read(api, 1)] == [1]  # offset 0 went to shop/orders-dlq
    html = admin_client.get(PAGE).content.decode()
    assert 'dead letters: <a href="/streams/shop/orders-dlq/">shop/orders-dlq</a>' in html
    row = segment_row(html)
    assert (row["floor"], row["redelivered"], row["dead_lettered"], row["pending"]) == ("1", "1", "1", "1")
    assert "Dead-lettered 1 after 2 deliveries" in text(html)


def test_the_group_page_costs_no_query_per_segment(admin_client, api, stream):
    wide = factories.make_stream("clicks", segment_count=8)
    factories.publish(wide, 40, b"y")
    create(api)
    create(api, name="wide", streams=["shop/clicks"])
    queries = {}
    for url in (PAGE, "/reader-groups/shop/wide/"):
        admin_client.get(url)  # the first visit makes the position rows
        with CaptureQueriesContext(connection) as ctx:
            assert admin_client.get(url).status_code == 200
        queries[url] = len(ctx.captured_queries)
    assert queries[PAGE] == queries["/reader-groups/shop/wide/"]


def test_navigation_and_the_stream_page_lead_to_the_reader_groups(admin_client, api, stream):
    create(api)
    assert '<a href="/reader-groups/"' in admin_client.get("/").content.decode()
    html = admin_client.get("/streams/shop/orders/").content.decode()
    assert '<a href="/reader-groups/shop/billing/">shop/billing</a>' in html


def test_metrics_carry_each_groups_positions_per_stream(client, api, stream):
    # billing: 6 handed out, 4 acknowledged; audit: offset 0 nacked once, then halted on it
    create(api)
    got = read(api, 6)
    ack(api, got[:4])
    audit = API + "shop/audit/"
    create(api, name="audit", max_deliveries=2, on_poison="halt")
    nack(api, read(api, 1, audit), audit)
    nack(api, read(api, 1, audit), audit)
    assert read(api, 1, audit) == []
    text_ = client.get("/metrics").content.decode()
    billing = 'reader_group="shop/billing",stream="shop/orders"'
    assert f"cbr_reader_group_pending{{{billing}}} 2.0" in text_
    assert f"cbr_reader_group_floor_lag_events{{{billing}}} 6.0" in text_
    assert f"cbr_reader_group_halted{{{billing}}} 0.0" in text_
    assert f"cbr_reader_group_redelivered_total{{{billing}}} 0.0" in text_
    assert f"cbr_reader_group_dead_lettered_total{{{billing}}} 0.0" in text_
    audit_labels = 'reader_group="shop/audit",stream="shop/orders"'
    assert f"cbr_reader_group_halted{{{audit_labels}}} 1.0" in text_
    assert f"cbr_reader_group_redelivered_total{{{audit_labels}}} 1.0" in text_
    assert f"cbr_reader_group_pending{{{audit_labels}}} 0.0" in text_
    assert f"cbr_reader_group_floor_lag_events{{{audit_labels}}} 10.0" in text_
    assert "# TYPE cbr_reader_group_dead_lettered_total counter" in text_
    assert "# TYPE cbr_reader_group_halted gauge" in text_


def test_metrics_sum_a_groups_segments_per_stream(client, api):
    wide = factories.make_stream("clicks", segment_count=4)
    factories.publish(wide, 40, b"y")
    create(api, name="wide", streams=["shop/clicks"])
    read(api, 6, API + "shop/wide/")
    text_ = client.get("/metrics").content.decode()
    labels = 'reader_group="shop/wide",stream="shop/clicks"'
    assert f"cbr_reader_group_pending{{{labels}}} 6.0" in text_
    assert f"cbr_reader_group_floor_lag_events{{{labels}}} 40.0" in text_


def test_a_checkpoint_is_deleted_from_the_group_page_after_a_confirmation(admin_client, api, stream):
    create(api)
    for name in ("keep", "drop"):
        api.post(G + "checkpoints/", {"name": name, "persist": True}, format="json")
    page = admin_client.get(PAGE).content.decode()
    assert 'hx-confirm="Delete checkpoint drop?' in page

    answer = admin_client.post(PAGE + "checkpoints/drop/delete/", HTTP_HX_REQUEST="true")

    fragment = text(answer.content.decode())
    assert answer.status_code == 200 and "Checkpoint drop deleted." in fragment
    assert "keep" in fragment and "drop persisted" not in fragment
    assert [c["name"] for c in api.get(G + "checkpoints/").json()["results"]] == ["keep"]
    # without JavaScript: back to the page
    assert admin_client.post(PAGE + "checkpoints/keep/delete/").status_code == 302
    assert api.get(G + "checkpoints/").json()["results"] == []


def test_an_at_most_once_group_says_so(admin_client, api, stream):
    create(api, retention_type="NONE", ack_policy="none")
    page = text(admin_client.get(PAGE).content.decode())
    assert "Ack policy none: at-most-once" in page and "Backoff none: redelivered at once" in page


def test_a_viewer_sees_checkpoints_without_a_delete_button(client, plain_user, api, stream):
    create(api)
    api.post(G + "checkpoints/", {"name": "keep", "persist": True}, format="json")
    client.force_login(plain_user)
    page = client.get(PAGE).content.decode()
    assert "keep" in page and "Delete checkpoint" not in page
    assert client.post(PAGE + "checkpoints/keep/delete/").status_code == 403
    assert [c["name"] for c in api.get(G + "checkpoints/").json()["results"]] == ["keep"]


def test_an_operator_seeks_a_group_from_its_page(admin_client, api, stream):
    create(api, retention_type="NONE")
    read(api, 4)
    page = admin_client.get(PAGE).content.decode()
    assert 'hx-confirm="Seek shop/billing?' in page and "Start head" in text(page)

    answer = admin_client.post(PAGE + "seek/", {"to": "tail", "generation": "0"}, HTTP_HX_REQUEST="true")

    assert answer["HX-Refresh"] == "true"  # everything on the page moved: it reloads
    assert "shop/billing moved to tail: generation 1." in text(admin_client.get(PAGE).content.decode())
    assert read(api, 100) == [] and api.get(G).json()["positions"][0]["pending"] == 0
    stale = admin_client.post(PAGE + "seek/", {"to": "head", "generation": "0"}, HTTP_HX_REQUEST="true")
    assert "Not moved: generation is 0; the group is at 1." in text(stale.content.decode())
    future = admin_client.post(PAGE + "seek/", {"to": "time", "time": "2999-01-01T00:00"}, HTTP_HX_REQUEST="true")
    assert "Not moved: time" in text(future.content.decode()) and "in the future" in text(future.content.decode())
    # the refused form keeps its choice and its time
    assert '<option value="time" selected>' in future.content.decode()
    assert 'value="2999-01-01T00:00"' in future.content.decode()
    assert admin_client.post(PAGE + "seek/", {"to": "head"}).status_code == 302
    assert len(read(api, 100)) == 10


def test_a_viewer_cannot_seek(client, plain_user, api, stream):
    create(api)
    client.force_login(plain_user)
    assert 'hx-confirm="Seek' not in client.get(PAGE).content.decode()
    assert client.post(PAGE + "seek/", {"to": "tail"}).status_code == 403
    assert api.get(G).json()["generation"] == 0


def test_lag_and_held_back_agree_across_pages_and_never_exceed_what_is_held(admin_client, api, stream, client):
    """Lag (from the floor) is the same number on the group list, the group's page and the stream
    page; held back (from the acknowledgement cut) trails it until a checkpoint; after a
    truncation passed the cut, both start at the head."""
    policy = {"limit_type": "size", "min": 0, "consumption_based": True}
    assert api.put("/api/v1/streams/shop/orders/retention-policy/", policy, format="json").status_code == 200
    create(api)
    ack(api, read(api, 6))
    assert api.post(G + "checkpoints/", {"name": "six"}, format="json").status_code == 201  # cut at 6
    ack(api, read(api, 2))  # floor 8, cut still 6

    def subscriber_row():
        return row_of(admin_client.get("/streams/shop/orders/").content.decode(), "shop/billing")

    assert row_of(admin_client.get("/reader-groups/").content.decode(), "shop/billing")[3] == "2"
    assert "Lag (events) 2 from the floor" in text(admin_client.get(PAGE).content.decode())
    row = subscriber_row()
    assert (row[2], row[3], row[4]) == ("2", "0:6", "4")  # lag, acknowledgement cut, held back
    metrics = client.get("/metrics").content.decode()
    assert 'cbr_subscriber_held_back_events{reader_group="shop/billing",stream="shop/orders"} 4.0' in metrics

    do_truncate(stream, {"0": 9}, rule="manual", trigger="api")  # past the cut and the floor: 1 event held
    row = subscriber_row()
    assert (row[2], row[4]) == ("1", "1")
    assert row_of(admin_client.get("/reader-groups/").content.decode(), "shop/billing")[3] == "1"


def flush_tallies():
    """What the process's wake-up listener does every second: its counts into Redis."""
    wait_stats.flush(get_redis(), 0)


def test_consumers_seen_with_their_rates_and_what_is_in_their_hands(admin_client, api, stream, clock):
    # given: half a minute into a minute, worker-1 reads two events and acknowledges them,
    # worker-2 reads one, and a read without a name takes another (ack timeout 30 s)
    clock.now = (clock.now // 60) * 60 + 30
    create(api, ack_timeout_s=30)
    got = api.post(G + "read/", {"max_events": 2, "consumer": "worker-1"}, format="json").json()["deliveries"]
    ids = [d["delivery_id"] for d in got]
    assert api.post(G + "ack/", {"delivery_ids": ids, "consumer": "worker-1"}, format="json").status_code == 200
    api.post(G + "read/", {"max_events": 1, "consumer": "worker-2"}, format="json")
    read(api, 1)
    flush_tallies()
    # then: each is shown with its rates over the last minute (2 events in it: 2/60 a second)
    # and the deliveries in its hands
    html = admin_client.get(PAGE).content.decode()
    # (the times are the test clock's, shown against the real one: only whether there is one)
    assert [cell != "—" for cell in row_of(html, "worker-1")[4:]] == [True, True]
    assert row_of(html, "worker-1")[1:4] == ["0", "0.03", "0.03"]
    assert row_of(html, "worker-2")[1:4] + row_of(html, "worker-2")[5:] == ["1", "0.02", "0", "—"]
    assert row_of(html, "default")[1:4] + row_of(html, "default")[5:] == ["1", "0.02", "0", "—"]
    listed = {c["name"]: c for c in api.get(G + "consumers/").json()["results"]}
    assert listed["worker-1"]["read_rate"] == pytest.approx(2 / 60) and listed["worker-1"]["acked"] == 2
    assert (listed["worker-2"]["in_flight"], listed["worker-2"]["delivered"], listed["worker-2"]["acked"]) == (1, 1, 0)
    # when: 45 s on (a quarter into the next minute), past the leases' 30 s
    clock.now += 45
    # then: three quarters of the last minute's counts still lie within a minute of now, and
    # the expired leases are no longer in anyone's hands
    listed = {c["name"]: c for c in api.get(G + "consumers/").json()["results"]}
    assert listed["worker-1"]["read_rate"] == pytest.approx(2 * 0.75 / 60)
    assert listed["worker-2"]["in_flight"] == 0 and listed["worker-2"]["read_rate"] == pytest.approx(0.75 / 60)
    bad = api.post(G + "ack/", {"delivery_ids": ids, "consumer": 7}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "consumer"


def test_a_consumer_silent_for_a_day_is_forgotten(api, stream, clock):
    create(api)
    api.post(G + "read/", {"max_events": 1, "consumer": "worker-1"}, format="json")
    clock.now += 3600
    api.post(G + "read/", {"max_events": 1, "consumer": "worker-2"}, format="json")
    flush_tallies()
    clock.now += 86_400 - 1800  # a day after worker-1's read, half an hour after worker-2's lease ended
    assert [c["name"] for c in api.get(G + "consumers/").json()["results"]] == ["worker-2"]
    group = ReaderGroup.objects.get(name="billing")
    fields = {f.decode() for f in get_redis().hkeys(consuming.floors.consumers_key(group.state_key))}
    assert fields == {"r:worker-2", "nr:worker-2"}  # worker-1's entries dropped


def test_metrics_name_each_consumer_up_to_a_bound_and_sum_the_rest(admin_client, api, stream, settings):
    create(api)
    for name in ("w1", "w2", "w3"):
        api.post(G + "read/", {"max_events": 2 if name == "w2" else 1, "consumer": name}, format="json")
    flush_tallies()
    settings.CBR_METRICS_CONSUMERS_PER_GROUP = 1
    metrics = admin_client.get("/metrics").content.decode()
    # w2 holds the most deliveries: it is named; w1 and w3 are summed as one
    assert 'cbr_consumer_inflight{consumer="w2",reader_group="shop/billing"} 2' in metrics
    assert 'cbr_consumer_inflight{consumer="_other",reader_group="shop/billing"} 2' in metrics
    assert 'cbr_consumer_delivered_events_total{consumer="_other",reader_group="shop/billing"} 2' in metrics
    assert 'consumer="w1"' not in metrics and 'consumer="w3"' not in metrics
    settings.CBR_METRICS_CONSUMERS_PER_GROUP = 10
    metrics = admin_client.get("/metrics").content.decode()
    assert 'cbr_consumer_inflight{consumer="w1",reader_group="shop/billing"} 1' in metrics
    assert "_other" not in metrics


def test_a_consumer_whose_read_waits_is_shown_waiting_until_it_reads_again(admin_client, api, stream, clock):
    # given: worker-1 read everything, then its next read waits (nothing left)
    create(api)
    read(api, 10)
    group = ReaderGroup.objects.get(name="billing")
    api.post(G + "read/", {"max_events": 1, "consumer": "worker-1"}, format="json")
    consuming.floors.note_waiting(group, "worker-1", 30)
    flush_tallies()  # (said into Redis within a second, with the consumers' counts)
    # then: the page says it waits
    assert "worker-1 waiting" in row_of(admin_client.get(PAGE).content.decode(), "worker-1")[0]
    # and once its read looks again (or the wait's time passes), it no longer does
    clock.now += 1
    api.post(G + "read/", {"max_events": 1, "consumer": "worker-1"}, format="json")
    assert row_of(admin_client.get(PAGE).content.decode(), "worker-1")[0] == "worker-1"


def test_checkpoint_now_and_release_at_a_checkpoint_from_the_page(admin_client, api, stream):
    create(api, name="manual", retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT")
    group = API + "shop/manual/"
    ack(api, read(api, 4, group), group)
    page = "/reader-groups/shop/manual/"
    done = admin_client.post(page + "checkpoints/", {"name": "four", "persist": "on"}, HTTP_HX_REQUEST="true")
    assert "Checkpoint four recorded." in text(done.content.decode()) and "Release here" in done.content.decode()
    answer = admin_client.post(page + "checkpoints/four/release/", HTTP_HX_REQUEST="true")
    assert "Released at four" in text(answer.content.decode())
    (sub,) = api.get(group).json()["streams"]
    assert sub["acknowledgement_cut"] == {"0": 4}
    admin_client.post(page + "checkpoints/", {"name": "loose"}, HTTP_HX_REQUEST="true")
    refused = admin_client.post(page + "checkpoints/loose/release/", HTTP_HX_REQUEST="true")
    assert "Not released" in text(refused.content.decode()) and "not persisted" in text(refused.content.decode())
    again = admin_client.post(page + "checkpoints/", {"name": "four"}, HTTP_HX_REQUEST="true")
    assert "No checkpoint: name" in text(again.content.decode())
