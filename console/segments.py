"""The stream page's Segments panel: the key space over epochs as a picture (each segment a box
from the epoch that made it to the one that sealed it, over its key range), the segments' rows,
the scaling policy in words and the scaling history. Plain data for the template; no query of
its own beyond the stream's."""

from __future__ import annotations

from dataclasses import dataclass

from domain.autoscale import COOL_DOWN_S, policy_of
from domain.segment_layout import Layout

WIDTH, HEIGHT = 640.0, 240.0  # the picture's viewBox


@dataclass(frozen=True)
class Box:
    id: str
    x: float
    y: float
    w: float
    h: float
    state: str  # "active", "sealed" or "retired"
    title: str

    @property
    def label_x(self) -> float:
        return self.x + self.w / 2

    @property
    def label_y(self) -> float:
        return self.y + self.h / 2 + 4

    @property
    def labelled(self) -> bool:
        """Whether the box is big enough to carry its id."""
        return self.w >= 18 and self.h >= 14


def key_space_boxes(layout: Layout) -> list[Box]:
    """Every segment the layout holds, as a box: x from the epoch that made it to the one that
    sealed it (the right edge for an active one), y over its key range (0 at the top)."""
    columns = layout.epoch + 1
    boxes = []
    for sid in layout.ids:
        s = layout[sid]
        ends = [layout[t].epoch for t in layout.successors(sid)]
        until = min(ends) if ends else columns
        state = "retired" if s.retired else ("sealed" if ends else "active")
        title = f"segment {sid}: keys [{s.lo:.4g}, {s.hi:.4g}), epoch {s.epoch}" + (
            f" to {until}" if ends else ", active"
        )
        if s.predecessors:
            title += f", replaces {', '.join(s.predecessors)}"
        if s.retired:
            title += f" (retired at offset {s.retired[0]}: its events are gone)"
        boxes.append(
            Box(
                sid,
                round(s.epoch / columns * WIDTH, 2),
                round(s.lo * HEIGHT, 2),
                round((until - s.epoch) / columns * WIDTH, 2),
                round((s.hi - s.lo) * HEIGHT, 2),
                state,
                title,
            )
        )
    return boxes


def epoch_ticks(layout: Layout) -> list[tuple[float, int]]:
    """Where each epoch's column starts (x), with its number: at most ~12 labelled."""
    columns = layout.epoch + 1
    every = max(1, columns // 12)
    return [(round((e + 0.5) / columns * WIDTH, 2), e) for e in range(0, columns, every)]


KIND_WORDS = {"fixed": "fixed", "by_event_rate": "by event rate", "by_byte_rate": "by byte rate"}
RATE_UNITS = {"by_event_rate": "events/s", "by_byte_rate": "KiB/s"}


def scaling_summary(stored: dict) -> str:
    """The panel header's few words: `scales by event rate, 1,000 events/s a segment, at least 2`."""
    policy = policy_of(stored)
    if policy.kind == "fixed":
        words = "scaled by hand only"
    else:
        words = f"scales {KIND_WORDS[policy.kind]}, {_exact(policy.target_rate)} {RATE_UNITS[policy.kind]} a segment"
    return words + (f", at least {policy.min_segments} segments" if policy.min_segments > 1 else "")


def scaling_rows(stored: dict) -> list[tuple[str, str]]:
    """A stream's stored `scaling_policy` (`domain.autoscale.policy_of`: empty is fixed) as
    (label, words) rows. A fixed policy has no rate, factor or cool-down: its only rule is
    `min_segments`, which splits a stream below it at once (the cool-down does not hold it)."""
    policy = policy_of(stored)
    minimum = (
        "1"  # (every stream has one)
        if policy.min_segments == 1
        else f"{policy.min_segments}: a stream with fewer active segments splits at the next evaluation"
    )
    if policy.kind == "fixed":
        return [("Policy", "fixed: the stream scales only when an operator scales it"), ("Min segments", minimum)]
    unit = RATE_UNITS[policy.kind]
    return [
        ("Policy", f"{KIND_WORDS[policy.kind]}: a segment over its target rate splits, cold neighbours merge"),
        ("Target rate", f"{_exact(policy.target_rate)} {unit} per segment"),
        ("Scale factor", f"{policy.scale_factor}: a hot segment splits into at most {policy.scale_factor} parts"),
        ("Min segments", minimum if policy.min_segments == 1 else f"{minimum}; no merge goes below it"),
        ("Cool-down", f"{COOL_DOWN_S / 60:g} minutes: a segment made or scaled within it is left alone"),
    ]


def _exact(rate: float) -> str:
    """A rate an operator typed, as typed (`1,000`, `12.5`): not rounded like a measured one."""
    return f"{rate:,.15g}"
