"""Auto-scaling against the real store and database, on a fake clock: a hot segment splits (by
event rate, by byte rate), its successors are left alone for the cool-down, cold neighbours merge
after 20 cold minutes and never below min_segments, a raised min_segments splits at once, the
samples live in the database (a restart loses none), and the policy over REST and the command."""

import time
from io import StringIO

import factories
import pytest
from django.core.management import call_command

from domain.events import EventIn
from streams import services
from streams.autoscaling import autoscale
from streams.models import Scaling, Segment, Stream

pytestmark = pytest.mark.django_db

S = "/api/v1/streams/shop/orders/"
T0 = 1_800_000_000.0


def stream_with(policy, segments=1):
    stream = factories.make_stream(segment_count=segments)
    services.do_set_scaling_policy(stream, policy)
    return Stream.objects.get(pk=stream.pk)


def publish(stream, n, size=10):
    """`n` events spread over every routing key (so over every active segment)."""
    stream = Stream.objects.get(pk=stream.pk)
    services.do_publish(stream, [EventIn(b"x" * size, routing_key=f"k{i}".encode()) for i in range(n)])


def minutes(stream, start, count, per_minute=0):
    """`count` evaluations a minute apart from `start`, publishing `per_minute` events before each:
    the scales made."""
    made = []
    for i in range(count):
        if per_minute:
            publish(stream, per_minute)
        made += autoscale(Stream.objects.get(pk=stream.pk), now=start + 60 * i)
    return made


def test_a_hot_segment_splits_and_its_successors_wait_for_the_cool_down():
    stream = stream_with({"type": "by_event_rate", "target_rate": 10, "scale_factor": 4})
    assert autoscale(stream, now=T0) == []  # the first sample: no rate yet
    publish(stream, 6000)  # 100 events/s over the next minute: over 5 × 10
    (scaling,) = autoscale(Stream.objects.get(pk=stream.pk), now=T0 + 60)
    assert scaling.trigger == "auto" and scaling.sealed == ["0"] and len(scaling.created) == 4
    assert "2-minute rate over 5 × target" in scaling.rule and scaling.rates["0"]["2m"] == 100.0
    # the four successors are hot too, but made within the cool-down: left alone for ten minutes
    assert minutes(stream, T0 + 120, 9, per_minute=6000) == []
    later = minutes(stream, T0 + 120 + 9 * 60, 2, per_minute=6000)
    assert later and all(len(s.sealed) >= 1 for s in later)


def test_split_by_byte_rate():
    stream = stream_with({"type": "by_byte_rate", "target_rate": 20})  # KiB/s per segment
    autoscale(stream, now=T0)
    publish(stream, 600, size=1024)  # 10 KiB/s: under the target
    assert autoscale(Stream.objects.get(pk=stream.pk), now=T0 + 60) == []
    publish(stream, 6000, size=1024)  # 100 KiB/s over the last minute: 55 over the last two (> 2 × 20)
    (scaling,) = autoscale(Stream.objects.get(pk=stream.pk), now=T0 + 120)
    assert scaling.sealed == ["0"] and "over" in scaling.rule


def test_cold_neighbours_merge_after_twenty_cold_minutes_never_below_min_segments():
    stream = stream_with({"type": "by_event_rate", "target_rate": 10, "min_segments": 2}, segments=4)
    made = minutes(stream, T0, 20)  # 20 minutes without an event: each pair of neighbours merges once
    assert [len(s.sealed) for s in made] == [4]  # one step, two merges (0+1, 2+3): 2 segments
    stream.refresh_from_db()
    assert stream.segment_count == 2
    assert minutes(stream, T0 + 21 * 60, 30) == []  # never below min_segments


def test_a_raised_min_segments_splits_at_once_and_the_samples_survive_a_restart(api):
    stream = stream_with({"type": "by_event_rate", "target_rate": 1000})
    autoscale(stream, now=T0)
    answer = api.put(
        S + "scaling-policy/", {"type": "by_event_rate", "target_rate": 1000, "min_segments": 3}, format="json"
    )
    assert answer.status_code == 200 and answer.json()["scaling_policy"]["min_segments"] == 3
    made = autoscale(Stream.objects.get(pk=stream.pk), now=T0 + 1)
    assert made and "min_segments is 3" in made[0].rule
    made = autoscale(Stream.objects.get(pk=stream.pk), now=T0 + 2)  # within the cool-down: min_segments wins
    stream.refresh_from_db()
    assert stream.segment_count == 3
    assert autoscale(Stream.objects.get(pk=stream.pk), now=T0 + 3) == []
    # what decides is in the database: each active segment's samples, read afresh by any process
    samples = {r.segment_id: r.rate_samples for r in Segment.objects.filter(stream=stream)}
    assert all(len(samples[s]) >= 1 for s in stream.layout.active_ids)


def test_the_policy_over_rest_and_its_refusals(api):
    created = api.post(
        "/api/v1/streams/",
        {
            "scope": "shop",
            "name": "orders",
            "scaling_policy": {"type": "by_event_rate", "target_rate": 50, "min_segments": 2},
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert created.json()["segment_count"] == 2  # min_segments is the first count too
    assert created.json()["scaling_policy"] == {
        "type": "by_event_rate",
        "target_rate": 50.0,
        "scale_factor": 2,
        "min_segments": 2,
    }
    for body, field in [
        ({"type": "by_event_rate"}, "scaling_policy.target_rate"),
        ({"type": "by_event_rate", "target_rate": 0}, "scaling_policy.target_rate"),
        ({"type": "by_event_rate", "target_rate": -5}, "scaling_policy.target_rate"),
        ({"type": "by_event_rate", "target_rate": "10"}, "scaling_policy.target_rate"),
        ({"type": "fixed", "target_rate": 10}, "scaling_policy.target_rate"),
        ({"type": "fixed", "target_rate": None}, "scaling_policy.target_rate"),  # null is no number
        ({"type": "by_rate", "target_rate": 10}, "scaling_policy.type"),
        ({"type": "by_event_rate", "target_rate": 10, "scale_factor": 1}, "scaling_policy.scale_factor"),
        ({"type": "by_event_rate", "target_rate": 10, "min_segments": 0}, "scaling_policy.min_segments"),
        ({"type": "by_event_rate", "target_rate": 10, "min_segments": 65}, "scaling_policy.min_segments"),
        ({"type": "by_event_rate", "target_rate": 10, "max_segments": 5}, "scaling_policy.max_segments"),
        ("fast", "scaling_policy"),
    ]:
        refused = api.put(S + "scaling-policy/", body, format="json")
        assert refused.status_code == 400 and refused.json()["field"] == field, (body, refused.json())
    assert api.get(S).json()["scaling_policy"]["target_rate"] == 50.0  # nothing changed
    patched = api.patch(S, {"scaling_policy": {"type": "fixed"}}, format="json")
    assert patched.status_code == 400 and patched.json()["field"] == "scaling_policy"


def test_manage_py_autoscale_prints_each_scale_with_its_rule_and_rates():
    stream = stream_with({"type": "by_event_rate", "target_rate": 1, "min_segments": 1})
    autoscale(stream, now=T0)
    Segment.objects.filter(stream=stream).update(rate_samples=[[time.time() - 60, 0, 0]])  # a minute ago
    publish(stream, 500)
    out = StringIO()
    call_command("autoscale", "--stream", "shop/orders", stdout=out)
    (line,) = out.getvalue().splitlines()
    assert line.startswith("shop/orders: epoch 1: split 0 into 2:") and "2m" in line
    assert Scaling.objects.get().trigger == "auto"
