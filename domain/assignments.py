"""Who reads which segment in an ordered reader group (`delivery: "ordered"`; docs/design/
stream-scaling.md, "Ordered groups"): each segment has one owner at a time, the segments are
spread evenly over the consumers heard from within `consumer_timeout_s`, and a segment never
changes hands while deliveries of it are in flight, so events of one routing key are processed
in order. Plain Python: the caller says who was heard from when, who owns what, and which
segments have deliveries in flight.

- An owner still heard from keeps its segments, except that a rebalance takes segments with
  nothing in flight from a consumer holding more than its share (a consumer that joins gets its
  share as soon as those segments are idle).
- A silent owner's segment passes to another consumer once none of its deliveries is in flight
  (its leases were acknowledged, given back or expired); until then it stays with it.
- A segment without an owner goes to the live consumer with the fewest segments (the first by
  name among equals), so the answer depends only on its inputs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping


def assign(
    segments: Collection[str],
    heard: Mapping[str, float],
    owners: Mapping[str, str],
    in_flight: Collection[str],
    now: float,
    consumer_timeout_s: float,
) -> dict[str, str]:
    """Segment -> owner. `heard`: each consumer's last read or ack (a time); `owners`: the
    current owners; `in_flight`: the segments with deliveries in flight. A segment nobody can
    take (no consumer heard from within the timeout) has no owner."""
    live = sorted(c for c, at in heard.items() if now - at <= consumer_timeout_s)
    out: dict[str, str] = {}
    free: list[str] = []
    for seg in sorted(segments):
        owner = owners.get(seg)
        if owner is not None and (owner in live or seg in in_flight):
            out[seg] = owner  # kept: its owner is live, or its deliveries are still in its hands
        else:
            free.append(seg)
    if not live:
        return out
    load = {c: 0 for c in live}
    for owner in out.values():
        if owner in load:
            load[owner] += 1
    share = -(-len(segments) // len(live))  # the most a live consumer holds when they are even
    # a consumer over its share gives up idle segments: they join the free ones
    for seg in sorted(out):
        owner = out[seg]
        if owner in load and load[owner] > share and seg not in in_flight:
            del out[seg]
            load[owner] -= 1
            free.append(seg)
    for seg in sorted(free):
        taker = min(live, key=lambda c: (load[c], c))
        out[seg] = taker
        load[taker] += 1
    # then even out what is still uneven by more than one, with idle segments only
    while True:
        most = max(live, key=lambda c: (load[c], c))
        least = min(live, key=lambda c: (load[c], c))
        if load[most] - load[least] <= 1:
            break
        idle = sorted(seg for seg, owner in out.items() if owner == most and seg not in in_flight)
        if not idle:
            break
        out[idle[0]] = least
        load[most] -= 1
        load[least] += 1
    return out
