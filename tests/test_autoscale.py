"""Auto-scaling's rule (domain.autoscale): which segments split and which neighbours merge, from
their rates, as one scale step that the layout accepts; and the complaints Pravega's users made of
theirs (oscillation, merges below min_segments, a raised min_segments ignored)."""

from __future__ import annotations

import itertools

import pytest

from domain.autoscale import COOL_DOWN_S, Rates, ScalingPolicy, plan
from domain.segment_layout import Layout

POLICY = ScalingPolicy("by_event_rate", target_rate=100, scale_factor=4, min_segments=2)
NOW = 10_000.0
NAMES = itertools.count()


def applied(layout: Layout, step) -> Layout:
    """The plan made into the next epoch: the layout must accept it as it is."""
    return layout.scale(step.seal, step.new_ranges, [f"n{next(NAMES)}" for _ in step.new_ranges]).layout


@pytest.mark.parametrize(
    ("rates", "parts", "rule"),
    [
        (Rates(m2=501), 4, "2-minute rate over 5 × target"),  # ceil(5.01) capped by scale_factor 4
        (Rates(m2=400, m5=201), 3, "5-minute rate over 2 × target"),  # 2-min not over 500: the 5-min fires
        (Rates(m10=150), 2, "10-minute rate over target"),
        (Rates(m10=101), 2, "10-minute rate over target"),  # never fewer than two parts
    ],
)
def test_a_hot_segment_splits_into_parts_its_rate_asks_for(rates, parts, rule):
    layout = Layout.fixed(2)
    step = plan(POLICY, layout, {"0": rates, "1": Rates(m2=60, m5=60, m10=60, m20=60)}, {}, NOW)
    assert step is not None and step.seal == ["0"] and len(step.new_ranges) == parts
    assert rule in step.reasons[0]
    after = applied(layout, step)
    assert [round(s.hi - s.lo, 9) for s in after.active][:parts] == [round(0.5 / parts, 9)] * parts


def test_neighbouring_cold_segments_merge_but_never_below_min_segments_nor_into_a_hot_one():
    layout = Layout.fixed(4)
    cold = Rates(m2=10, m5=10, m10=10, m20=10)
    step = plan(POLICY, layout, dict.fromkeys("0123", cold), {}, NOW)
    assert step is not None and step.seal == ["0", "1", "2", "3"] and step.new_ranges == [[0, 0.5], [0.5, 1]]
    after = applied(layout, step)
    assert len(after.active) == 2
    assert plan(POLICY, after, {s.id: cold for s in after.active}, {}, NOW) is None  # at min_segments
    # cold, but merged they would be hot at once: left apart (no merge the next look splits again)
    warm = Rates(m2=60, m5=60, m10=60, m20=40)
    assert plan(POLICY, layout, dict.fromkeys("0123", warm), {}, NOW) is None
    # a 20-minute rate at half the target or more: not cold yet
    assert plan(POLICY, layout, dict.fromkeys("0123", Rates(m2=1, m5=1, m10=1, m20=50)), {}, NOW) is None


def test_a_segment_scaled_within_the_cool_down_is_left_alone():
    layout = Layout.fixed(2)
    hot = {"0": Rates(m10=300), "1": Rates(m10=300)}
    step = plan(POLICY, layout, hot, {"0": NOW - 60}, NOW)
    assert step is not None and step.seal == ["1"]
    assert plan(POLICY, layout, hot, {"0": NOW - 60, "1": NOW - 1}, NOW) is None
    assert plan(POLICY, layout, hot, {"0": NOW - COOL_DOWN_S, "1": NOW - COOL_DOWN_S}, NOW).seal == ["0", "1"]


def test_a_raised_min_segments_is_acted_on_at_once_whatever_the_rates():
    layout = Layout.fixed(1)
    policy = ScalingPolicy("by_event_rate", target_rate=100, min_segments=3)
    steps = 0
    while len(layout.active) < 3:
        step = plan(policy, layout, {}, {s.id: NOW for s in layout.active}, NOW)  # in the cool-down, idle
        assert step is not None and "min_segments is 3" in step.reasons[0]
        layout = applied(layout, step)
        steps += 1
    assert (len(layout.active), steps) == (3, 2)  # 1 -> 2 -> 3: as many of the widest split as are missing
    fixed = ScalingPolicy("fixed", min_segments=2)
    assert len(applied(Layout.fixed(1), plan(fixed, Layout.fixed(1), {}, {}, NOW)).active) == 2
    assert plan(fixed, Layout.fixed(2), {"0": Rates(m2=10**6)}, {}, NOW) is None  # fixed: never by rate


def test_a_steady_load_at_the_target_settles_and_does_not_oscillate():
    # a stream whose load is 450 events/s, spread over its keys, scaled each time its segments
    # are out of the cool-down: it settles, and stays settled
    layout, made = Layout.fixed(1), {}
    policy = ScalingPolicy("by_event_rate", target_rate=100, scale_factor=2, min_segments=1)
    epochs = []
    for minute in range(0, 600, 10):
        now = minute * 60.0
        share = {s.id: 450 * (s.hi - s.lo) for s in layout.active}
        rates = {sid: Rates(r, r, r, r) for sid, r in share.items()}
        step = plan(policy, layout, rates, made, now)
        if step is not None:
            before = set(layout.segments)
            layout = applied(layout, step)
            made.update({sid: now for sid in set(layout.segments) - before})
            epochs.append(minute)
    assert all(450 * (s.hi - s.lo) <= 100 for s in layout.active)  # no segment over the target
    assert len(layout.active) == 8 and epochs == [0, 10, 20]  # 1 -> 2 -> 4 -> 8, then no more
