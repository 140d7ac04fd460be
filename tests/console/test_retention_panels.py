from datetime import timedelta

import factories
import pytest
from django.utils import timezone

from groups.models import Subscription
from retention.models import RetentionCycle
from retention.services import do_truncate

pytestmark = pytest.mark.django_db


@pytest.fixture
def stream():
    stream = factories.make_stream(
        policy={"limit_type": "size", "min": 10, "consumption_based": True, "subscriber_timeout_s": 60}
    )
    factories.publish(stream, 30, b"x" * 10)
    for name, age in (("billing", 5), ("audit", 600)):
        factories.subscribe(stream, name, {"0": 12}, acknowledged_at=timezone.now() - timedelta(seconds=age))
    return stream


def test_the_stream_page_shows_subscribers_with_lag_and_staleness(admin_client, stream):
    html = admin_client.get("/streams/shop/orders/").content.decode()
    assert "shop/billing" in html and "shop/audit" in html
    assert ">18<" in html  # lag: tail 30 - cut 12
    assert html.count('chip ok">active') == 1 and html.count('chip warn">stale') == 1


def test_the_chart_marks_each_truncation_with_its_rule(admin_client, stream):
    do_truncate(stream, {"0": 5}, rule="cbr:case-i:slb", trigger="beat")
    factories.publish(stream, 5, b"x" * 10)
    do_truncate(stream, {"0": 12}, rule="cbr:case-ii:limit_min", trigger="beat")
    html = admin_client.get("/streams/shop/orders/").content.decode()
    assert "<svg" in html and html.count('<g class="drop">') == 2
    assert "cbr:case-i:slb: reclaimed 50\xa0bytes" in html
    assert "cbr:case-ii:limit_min: reclaimed 70\xa0bytes" in html


def test_run_retention_now_queues_a_cycle_and_the_panel_polls_until_done(admin_client, stream, test_broker):
    response = admin_client.post("/streams/shop/orders/retention/run/", HTTP_HX_REQUEST="true")
    fragment = response.content.decode()
    cycle = RetentionCycle.objects.get()
    assert cycle.trigger == "console" and cycle.stream == stream
    assert 'id="cycle-panel"' in fragment and 'hx-trigger="every 1s"' in fragment
    # when the worker finished, the panel stops polling and says what happened
    RetentionCycle.objects.filter(pk=cycle.pk).update(
        state="done", truncations=1, bytes_reclaimed=120, started_at=timezone.now(), finished_at=timezone.now()
    )
    done = admin_client.get(f"/cycles/{cycle.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert "every 1s" not in done and "1 truncation" in done and "120\xa0bytes reclaimed" in done


def test_a_viewer_cannot_run_retention(client, plain_user, stream):
    client.force_login(plain_user)
    assert client.post("/streams/shop/orders/retention/run/").status_code == 403
    assert not RetentionCycle.objects.exists()


def test_the_dashboard_counts_consumption_streams_without_an_active_subscriber(admin_client, stream):
    html = admin_client.get("/").content.decode()
    assert "Without active subscriber" in html and "of 1 consumption-based stream" in html
    Subscription.objects.filter(reader_group__name="billing").update(
        acknowledged_at=timezone.now() - timedelta(hours=1)
    )
    html = admin_client.get("/").content.decode()
    assert ': <a href="/streams/shop/orders/">shop/orders</a>' in html


def test_metrics_report_consumption_per_subscriber(client, stream):
    started = timezone.now()
    RetentionCycle.objects.create(
        trigger="beat", state="done", streams_total=3, started_at=started, finished_at=started + timedelta(seconds=2.5)
    )
    text = client.get("/metrics").content.decode()
    assert "cbr_retention_cycle_duration_seconds 2.5" in text
    assert 'cbr_retention_cycles_total{state="done"} 1.0' in text
    assert 'cbr_stream_unconsumed_events{stream="shop/orders"} 18.0' in text
    assert 'cbr_subscriber_acknowledged_events_total{reader_group="shop/billing",stream="shop/orders"} 12.0' in text
    assert 'cbr_subscriber_active{reader_group="shop/audit",stream="shop/orders"} 0.0' in text
    assert "cbr_streams_without_active_subscriber 0.0" in text
    assert "cbr_streams_with_zero_subscribers 0.0" in text
    assert "cbr_streams_with_all_subscribers_inactive 0.0" in text


def test_metrics_tell_streams_with_no_subscriber_from_streams_whose_subscribers_are_all_stale(client, stream):
    factories.make_stream("lonely", policy={"limit_type": "time", "min": 60, "consumption_based": True})
    Subscription.objects.filter(stream=stream).update(acknowledged_at=timezone.now() - timedelta(days=1))
    text = client.get("/metrics").content.decode()
    assert "cbr_streams_with_zero_subscribers 1.0" in text  # shop/lonely
    assert "cbr_streams_with_all_subscribers_inactive 1.0" in text  # shop/orders
    assert "cbr_streams_without_active_subscriber 2.0" in text


def test_a_full_stream_says_it_refuses_publishing_and_why(admin_client, stream):
    assert "Publishing refused" not in admin_client.get("/streams/shop/orders/").content.decode()
    stream.full_since = timezone.now()
    stream.save(update_fields=["full_since"])
    html = admin_client.get("/streams/shop/orders/").content.decode()
    assert "Publishing refused since" in html and "reject_publish" in html and "507" in html
