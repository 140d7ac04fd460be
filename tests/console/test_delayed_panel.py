"""The stream page's delayed-delivery panel and the delayed index's series on /metrics: what a
person and Prometheus see once delayed events were published and their buckets sealed
(docs/delayed.md), against the real segment store, Redis and database."""

import time

import factories
import pytest
from page_text import row_of, rows, text
from prometheus_client.parser import text_string_to_metric_families

from domain.events import EventIn
from domain.quantities import size_text as filesizeformat
from streams import services
from streams.delaying import maintenance
from streams.delaying.projection import _spread_at_or_before, delayed_state
from streams.models import DelayedBucket

pytestmark = pytest.mark.django_db

PAGE = "/streams/shop/orders/"
PANEL = PAGE + "delayed/"
SMALL = {"min_index_count_per_bucket": 20, "max_time_step_per_segment_s": 30, "max_indexes_per_segment": 5}
LABELS = {"stream": "shop/orders"}


@pytest.fixture
def now_ms():
    return int(time.time() * 1000)


@pytest.fixture
def stream(api, now_ms):
    """100 delayed events in 10 publish batches (10 chunks of the index), due one a second from
    60 s on: the batches 1-2, 3-4, 5-6 and 7-8 are sealed into 4 buckets of 20 indexes, each cut
    into 4 snapshot segments of 5, one of them loaded; batches 9-10 stay in the mutable bucket."""
    stream = factories.create_stream_over_api(api, delayed_index=SMALL)
    for batch in range(10):
        services.do_publish(
            stream, [EventIn(b"x", deliver_at_ms=due_ms(now_ms, i)) for i in range(batch * 10, batch * 10 + 10)]
        )
    maintenance.maintain(stream, now_ms)
    return stream


def due_ms(now_ms: int, i: int) -> int:
    return now_ms + 60_000 + i * 1000


def metrics(client) -> dict[tuple[str, tuple], float]:
    """Every sample of /metrics by (name, sorted labels)."""
    answer = client.get("/metrics")
    assert answer.status_code == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(answer.content.decode())
        for s in family.samples
    }


def sample(figures, name, **labels) -> float:
    return figures[(name, tuple(sorted({**LABELS, **labels}.items())))]


def test_the_sealed_stream_is_as_the_fixture_says(stream):
    # given the fixture's stream, then 4 sealed buckets of 4 segments of 5, one loaded each
    buckets = list(DelayedBucket.objects.filter(stream=stream))
    assert [b.index_count for b in buckets] == [20, 20, 20, 20]
    assert all([s["count"] for s in b.segments] == [5, 5, 5, 5] for b in buckets)


def test_the_stream_page_shows_pending_delayed_events_and_the_next_delivery(admin_client, stream, now_ms):
    html = admin_client.get(PAGE).content.decode()
    page = text(html)
    # 20 in the mutable bucket + 4 loaded segments of 5 in Redis, 4 x 15 in the snapshots
    assert "Pending delayed events 100 " in page
    assert "Held in Redis 40 mutable 20 · sealing 0 · queued 20 · handing out 0" in page
    assert "In snapshots, not loaded 60 " in page
    assert "4 sealed + 1 mutable" in page
    first = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(due_ms(now_ms, 0) // 1000))
    assert f"Next delivery {first} UTC" in page


def test_the_stream_page_lists_each_sealed_bucket_and_the_mutable_one(admin_client, stream):
    html = admin_client.get(PAGE).content.decode()
    sealed = [b for b in DelayedBucket.objects.filter(stream=stream)]
    for b in sealed:
        row = row_of(html, str(b.first_chunk))  # a bucket sealed from one generation: one chunk number
        assert row[1:5] == ["1 / 4", "20", "20", "15"], row
        assert row[6] == " ".join(filesizeformat(b.snapshot_bytes).split()), row
    assert row_of(html, "mutable")[2:5] == ["20", "20", "0"]
    assert len([r for r in rows(html) if len(r) == 7 and r[1] == "1 / 4"]) == 4


def test_the_operations_log_shows_each_seal(admin_client, stream):
    html = admin_client.get(PAGE).content.decode()
    creates = [r for r in rows(html) if len(r) == 5 and r[1] == "create"]
    assert len(creates) == 4
    assert all(r[2] == "succeed" and r[3].endswith(" ms") and "20 indexes, 4 segments" in r[4] for r in creates)


def test_the_panel_follows_the_index_as_events_come_due(admin_client, stream, now_ms):
    # when the clock passes the first 7 events: bucket one's loaded segment, then its next one
    maintenance.maintain(stream, due_ms(now_ms, 6))
    html = admin_client.get(PANEL, HTTP_HX_REQUEST="true").content.decode()
    page = text(html)
    # then 93 pending; the first bucket has 2 of 4 segments loaded, 10 indexes not loaded
    assert "Pending delayed events 93 " in page
    assert "In snapshots, not loaded 55 " in page
    first = DelayedBucket.objects.filter(stream=stream).order_by("first_chunk")[0]
    assert row_of(html, str(first.first_chunk))[1:5] == ["2 / 4", "20", "15", "10"]
    loads = [r for r in rows(html) if len(r) == 5 and r[1] == "load"]
    assert len(loads) == 1 and loads[0][2] == "succeed" and "segment 1" in loads[0][4]


def test_the_panel_is_sent_alone_to_htmx_and_polls(admin_client, stream):
    html = admin_client.get(PANEL, HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="delayed-panel"')
    assert 'hx-trigger="every 3s"' in html and f'hx-get="{PANEL}"' in html
    assert "<html" not in html and "Truncation history" not in html  # the panel, not the page
    assert 'id="delayed-panel"' in admin_client.get(PAGE).content.decode()


def test_a_stream_without_delayed_events_has_no_delayed_panel(admin_client):
    factories.publish(factories.make_stream(), 1, b"now")
    assert "Delayed delivery" not in admin_client.get(PAGE).content.decode()
    assert admin_client.get(PANEL, HTTP_HX_REQUEST="true").content.decode().strip() == ""


def test_pending_by_due_time_adds_up_and_lies_where_the_events_are_due(stream, now_ms):
    state = delayed_state(stream, now_ms, bins=24)
    assert state.due_now == 0
    assert sum(b.count for b in state.by_due_time) == state.pending == 100
    assert state.by_due_time[0].start_ms == now_ms and state.by_due_time[-1].end_ms >= due_ms(now_ms, 99)
    for b in state.by_due_time:
        # the snapshots' unloaded segments are spread over [min, max]: off by one at each edge at most
        truly = sum(1 for i in range(100) if b.start_ms < due_ms(now_ms, i) <= b.end_ms)
        assert abs(b.count - truly) <= 2, (b, truly)
    assert [b.count for b in state.by_due_time if b.end_ms < due_ms(now_ms, 0)] == [0] * 9


def test_events_past_due_are_counted_as_due_now(stream, now_ms):
    state = delayed_state(stream, due_ms(now_ms, 9), bins=24)  # no read or maintenance since
    assert state.due_now == 10
    assert state.due_now + sum(b.count for b in state.by_due_time) == 100


def test_a_snapshot_segment_is_spread_evenly_over_its_time_range():
    segment = {"min": 1000, "max": 5000, "count": 5}
    assert [_spread_at_or_before(segment, t) for t in (999, 1000, 2000, 3000, 4999, 5000, 9000)] == [
        0,
        0,
        1,
        2,
        5,
        5,
        5,
    ]
    assert _spread_at_or_before({"min": 7, "max": 7, "count": 3}, 7) == 3


def test_metrics_carry_the_delayed_index_of_each_stream(client, stream):
    figures = metrics(client)
    snapshot_bytes = sum(b.snapshot_bytes for b in DelayedBucket.objects.filter(stream=stream))
    assert snapshot_bytes > 0
    assert sample(figures, "cbr_delayed_message_index_bucket_total") == 5  # 4 sealed + the mutable one
    assert sample(figures, "cbr_delayed_message_index_loaded") == 40
    assert sample(figures, "cbr_delayed_message_index_bucket_snapshot_size_bytes") == snapshot_bytes
    assert sample(figures, "cbr_delayed_message_pending") == 100
    op = "cbr_delayed_message_index_bucket_op_count_total"
    assert sample(figures, op, type="create", state="succeed") == 4
    assert sample(figures, op, type="create", state="failed") == 0
    assert sample(figures, op, type="create", state="all") == 4  # PIP-195's total of both states
    assert sample(figures, op, type="merge", state="succeed") == 0
    assert sample(figures, op, type="merge", state="all") == 0


def test_the_operations_latency_is_a_cumulative_histogram(client, stream):
    figures = metrics(client)
    name = "cbr_delayed_message_index_bucket_op_latency_ms"
    les = ["1.0", "5.0", "10.0", "50.0", "100.0", "500.0", "1000.0", "5000.0", "30000.0", "60000.0", "+Inf"]
    counts = [sample(figures, name + "_bucket", type="create", le=le) for le in les]
    assert counts == sorted(counts) and counts[-1] == 4  # cumulative: +Inf holds every seal
    assert sample(figures, name + "_count", type="create") == 4
    assert sample(figures, name + "_sum", type="create") > 0
    assert sample(figures, name + "_count", type="load") == 0


def test_metrics_follow_a_load_and_leave_out_streams_without_a_delayed_index(client, stream, now_ms):
    factories.make_stream("plain")
    maintenance.maintain(stream, due_ms(now_ms, 6))
    figures = metrics(client)
    assert sample(figures, "cbr_delayed_message_pending") == 93
    assert sample(figures, "cbr_delayed_message_index_loaded") == 38  # 20 mutable + 20 - 7 + 5 loaded
    assert sample(figures, "cbr_delayed_message_index_bucket_op_count_total", type="load", state="succeed") == 1
    assert not [k for k in figures if k[0].startswith("cbr_delayed") and ("stream", "shop/plain") in k[1]]
