"""api/exposition.py writes what prometheus_client's `generate_latest` writes for the same
families, byte for byte (it replaced prometheus_client's objects on /metrics for speed, and every
scraper, alert and dashboard reads the text), and /metrics parses as Prometheus' text format."""

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from ops.exposition import Family, exposition, label_set

pytestmark = pytest.mark.django_db

LABELS = [
    {"stream": "shop/orders", "reader_group": "shop/billing"},
    {"stream": 'we"ird\\name\nnext', "reader_group": "ünïcode/grüppe"},
    {"stream": "", "reader_group": "a/b"},
]
VALUES = [0, 1, 12.5, 999_999, 1_000_000, 2**53 + 1, 1e-7, float("inf"), float("nan"), -3, -999_999, -5_000_000, True]


class Collected:
    def __init__(self, families):
        self.families = families

    def collect(self):
        return self.families


def theirs(families) -> bytes:
    registry = CollectorRegistry()
    registry.register(Collected(families))
    return generate_latest(registry)


@pytest.mark.parametrize("kind", ["gauge", "counter"])
def test_a_family_is_written_as_prometheus_client_writes_it(kind):
    made = {"gauge": GaugeMetricFamily, "counter": CounterMetricFamily}[kind]
    doc = 'what it counts, with a back\\slash and a\nnew line "quoted"'
    reference = made("cbr_thing", doc, labels=["stream", "reader_group"])
    ours = Family("cbr_thing", doc, kind)
    for labels in LABELS:
        for value in VALUES:
            reference.add_metric([labels["stream"], labels["reader_group"]], value)
            ours.add(label_set(**labels), value)
    plain, plain_reference = Family("cbr_plain", "no labels", kind), made("cbr_plain", "no labels")
    plain.add("", 42)
    plain_reference.add_metric([], 42)
    empty, empty_reference = Family("cbr_empty", "no samples", kind), made("cbr_empty", "no samples", labels=["x"])

    assert exposition([ours, plain, empty]) == theirs([reference, plain_reference, empty_reference])


def test_prometheus_client_families_among_ours_are_written_by_it_in_their_place():
    histogram = HistogramMetricFamily("cbr_latency_ms", "latency", labels=["stream"])
    histogram.add_metric(["shop/orders"], [("1.0", 2), ("+Inf", 3)], 7.5)
    before, after = Family("cbr_before", "first"), Family("cbr_after", "last", "counter")
    before.add(label_set(stream="s"), 1)
    after.add("", 2)
    reference_before = GaugeMetricFamily("cbr_before", "first", labels=["stream"])
    reference_before.add_metric(["s"], 1)
    reference_after = CounterMetricFamily("cbr_after", "last")
    reference_after.add_metric([], 2)

    assert exposition([before, histogram, after]) == theirs([reference_before, histogram, reference_after])


def test_only_gauges_and_counters_are_written_here():
    with pytest.raises(ValueError, match="histogram"):
        Family("cbr_latency_ms", "latency", "histogram")


def test_metrics_parse_as_prometheus_text(client):
    families = {f.name: f for f in text_string_to_metric_families(client.get("/metrics").content.decode())}
    assert families["cbr_truncations"].type == "counter"
    assert families["cbr_retention_cycle_duration_seconds"].type == "gauge"
    assert families["cbr_delayed_message_index_bucket_op_latency_ms"].type == "histogram"
