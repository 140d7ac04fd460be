"""The stream page's Segments panel: the key space over epochs as a picture (each segment a box
from the epoch that made it to the one that sealed it, over its key range), the segments' rows
and the scaling history. Plain data for the template; no query of its own beyond the stream's."""

from __future__ import annotations

from dataclasses import dataclass

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
