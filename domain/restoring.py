"""Where a segment rebuilt from long-term storage starts and ends, and what it lost
(`manage.py restore_from_tier`, docs/design/long-term-storage.md "Losing a host"). Plain Python:
the chunks the tier holds (their offset ranges) and what the database knows decide it.

Offsets are never given to two events: appends go on at or past the highest offset anyone may
have seen (the segment's row, a reader group's hand-outs), so what no tier holds is a gap, not
offsets used again. The head is where the last truncation left it, or the first chunk the tier
holds when that begins later (what lay between is lost)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RestorePlan:
    head: int  # the segment's head once rebuilt
    first: int  # where its first restored chunk begins (== tail when none)
    tail: int  # where appends go on
    lost: list[tuple[int, int]]  # [from, to) offsets whose events no tier holds, in order


def plan_restore(copied: list[tuple[int, int]], known_head: int, known_tail: int) -> RestorePlan:
    """The plan for one segment from its chunks in the tier (`(base, end)` each, in order) and
    what the database knows: the head the last truncation left (`known_head`) and the highest
    offset anyone was told of (`known_tail`). Lost: before the first copied chunk (its head's
    chunk never copied), between two copied chunks (a sealed chunk never copied), after the last
    one (the active chunk, never sealed, and what was sealed but not copied yet)."""
    if not copied:  # nothing was ever copied: every event the segment held is lost
        tail = max(known_head, known_tail)
        return RestorePlan(tail, tail, tail, [(known_head, tail)] if tail > known_head else [])
    lost = []
    first = copied[0][0]
    if first > known_head:
        lost.append((known_head, first))
    for (_, end), (base, _) in zip(copied, copied[1:]):
        if base > end:
            lost.append((end, base))
    end = copied[-1][1]
    tail = max(end, known_tail)
    if tail > end:
        lost.append((end, tail))
    return RestorePlan(max(known_head, first), first, tail, lost)
