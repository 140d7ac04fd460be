"""The stream page's size chart as inline SVG, drawn on the server: payload held over time, a
sawtooth whose drops are truncations, each labelled with its rule. Plain Python, no JS library."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Point:
    at: datetime
    held: int
    rule: str | None = None  # set on the point a truncation drops to


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    path: str
    drops: list[tuple[float, float, float, str, int]]  # x, y_before, y_after, rule, reclaimed
    max_held: int
    start: datetime
    end: datetime


def held_series(truncations, now: datetime, held_now: int) -> list[Point]:
    """Points from oldest to newest: before and after each truncation, then now."""
    points: list[Point] = []
    for t in sorted(truncations, key=lambda t: (t.created_at, t.pk)):
        if t.held_before is None:
            continue
        points.append(Point(t.created_at, t.held_before))
        points.append(Point(t.created_at, t.held_after, t.rule))
    points.append(Point(now, held_now))
    return points


def draw(points: list[Point], width: int = 860, height: int = 180, pad: int = 8) -> Chart | None:
    if len(points) < 2:
        return None
    start, end = points[0].at, points[-1].at
    span = max((end - start).total_seconds(), 1.0)
    top = max(p.held for p in points) or 1

    def x(p: Point) -> float:
        return round(pad + (width - 2 * pad) * (p.at - start).total_seconds() / span, 1)

    def y(held: int) -> float:
        return round(height - pad - (height - 2 * pad) * held / top, 1)

    path = "M" + " L".join(f"{x(p)},{y(p.held)}" for p in points)
    drops = []
    for before, after in zip(points, points[1:]):
        if after.rule is not None:
            drops.append((x(after), y(before.held), y(after.held), after.rule, before.held - after.held))
    return Chart(width, height, path, drops, top, start, end)
