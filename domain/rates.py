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


def windowed_rate(previous: int, current: int, into_s: float, window_s: float = 60.0) -> float:
    """Per second over the last `window_s`, from counts kept per window: `current` so far in the
    window that began `into_s` ago, `previous` in the whole window before it. The part of the
    previous window the last `window_s` still covers is taken as evenly spread (a sliding window
    from two fixed ones: no sample per event). A window just begun shows the previous one's rate."""
    into_s = min(max(into_s, 0.0), window_s)
    return (previous * (window_s - into_s) / window_s + current) / window_s
