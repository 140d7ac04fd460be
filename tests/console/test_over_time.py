"""Rates and backlog over time: the sampler reads the real store and Redis, the series give the
publish and acknowledgement rates between samples and each group's lag, the window is bounded,
and the stream page carries the data its charts draw (and a fallback without JavaScript)."""

import json
import re
from datetime import timedelta

import factories
import pytest
from django.utils import timezone

from domain.rates import rates, windowed_rate
from groups import consuming
from groups.models import Sample
from groups.sampling import series, take_samples

pytestmark = pytest.mark.django_db


def test_rates_never_go_negative_and_skip_what_cannot_be_a_rate():
    assert rates([(0, 0), (10, 50), (20, 50), (30, 20), (40, 40), (50, None), (60, 70)]) == [
        (10, 5.0),
        (20, 0.0),
        (30, None),  # went back: a seek, a stream made again
        (40, 2.0),
        (50, None),
        (60, None),
    ]
    assert rates([]) == [] and rates([(5, 1)]) == []


def consume(group, n):
    deliveries = consuming.read(group, n).deliveries
    consuming.ack(group, [d["delivery_id"] for d in deliveries])


def test_the_sampler_gives_publish_and_ack_rates_and_lag(data_dir, settings):
    stream = factories.make_stream("orders")
    factories.publish(stream, 100, b"x" * 10)
    group = factories.make_group(stream)
    t0 = timezone.now() - timedelta(seconds=120)
    consume(group, 20)
    assert take_samples(t0) == 2  # the stream, and the group on it
    factories.publish(stream, 60, b"x" * 10)
    consume(group, 50)
    take_samples(t0 + timedelta(seconds=60))
    s = series(stream, since=t0 - timedelta(seconds=1))
    assert s.times == [t0.timestamp(), t0.timestamp() + 60]
    assert s.held_bytes == [1000, 1600]
    assert s.publish_rate == [None, 1.0]  # 60 events in 60 s
    assert s.groups["shop/billing"]["ack_rate"] == [None, pytest.approx(50 / 60)]
    assert s.groups["shop/billing"]["lag"] == [80, 90]  # 100 - 20, then 160 - 70

    settings.CBR_SAMPLE_WINDOW_S = 90
    take_samples(t0 + timedelta(seconds=120))  # the first sample is past the window now
    assert Sample.objects.filter(at=t0).count() == 0 and Sample.objects.count() == 4
    settings.CBR_SAMPLE_MAX_STREAMS = 0
    assert take_samples(t0 + timedelta(seconds=180)) == 0


def test_the_stream_page_carries_the_series_and_a_fallback(admin_client, data_dir):
    stream = factories.make_stream("orders")
    page = admin_client.get("/streams/shop/orders/").content.decode()
    assert "No samples yet" in page
    factories.publish(stream, 10)
    t0 = timezone.now() - timedelta(seconds=60)
    take_samples(t0)
    assert "No samples yet" in admin_client.get("/streams/shop/orders/").content.decode()  # one: no rate to draw
    factories.publish(stream, 30)
    take_samples(t0 + timedelta(seconds=30))
    page = admin_client.get("/streams/shop/orders/").content.decode()
    data = json.loads(re.search(r'<script id="over-time-data" type="application/json">(.*?)</script>', page, re.S)[1])
    assert data["publish_rate"] == [None, 1.0] and len(data["times"]) == 2
    assert 'data-chart="rates"' in page and "vendor/uplot/uPlot.iife.min.js" in page
    assert "<noscript>" in page  # the server-drawn chart, for reading without JavaScript


@pytest.mark.parametrize(
    ("previous", "current", "into_s", "per_s"),
    [
        (0, 0, 30, 0.0),
        (60, 0, 0, 1.0),  # a window just begun: the previous one's rate
        (60, 30, 30, 1.0),  # half of the previous window's 60, and this one's 30, in the last minute
        (0, 30, 30, 0.5),
        (120, 0, 59.999, pytest.approx(120 * (0.001 / 60) / 60)),  # the previous window all but gone
        (60, 60, 90, 1.0),  # past the window's end: taken as its end
    ],
)
def test_a_rate_over_the_last_minute_from_two_windows_counts(previous, current, into_s, per_s):
    assert windowed_rate(previous, current, into_s) == per_s
