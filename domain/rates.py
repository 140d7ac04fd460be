"""Rates from sampled counters, as plain values: what the console draws as publish and
acknowledgement rates over time."""

from __future__ import annotations

from collections.abc import Sequence


def rates(points: Sequence[tuple[float, int | None]]) -> list[tuple[float, float | None]]:
    """Per second between consecutive samples `(time, counter)`, placed at the later sample's
    time. A counter that went back (a seek, a stream deleted and made again) or a gap in the
    samples gives no rate for that interval (None), never a negative one."""
    out: list[tuple[float, float | None]] = []
    for (t0, c0), (t1, c1) in zip(points, points[1:], strict=False):
        if c0 is None or c1 is None or t1 <= t0 or c1 < c0:
            out.append((t1, None))
        else:
            out.append((t1, (c1 - c0) / (t1 - t0)))
    return out
