"""Browsing a stream's live log (the console's event browser): a page of events from a cut,
optionally only those with a routing key or a compaction key. A filtered page reads on through
the log until it has its events or has examined `budget` of them, so a rare key never makes a
page read the whole stream; the page says how many it examined and where to go on from."""

from __future__ import annotations

from dataclasses import dataclass

from streams.logs import stream_log
from streams.models import Stream
from streams.wire import event_json


@dataclass(frozen=True)
class BrowsePage:
    events: list[dict]  # as the API answers them (`streams.wire.record_json`)
    next_cut: dict[str, int]  # where the next page starts
    examined: int  # events read to fill the page
    at_tail: bool  # nothing after next_cut (yet)


def browse(
    stream: Stream,
    start: dict[str, int],
    limit: int,
    routing_key: str | None = None,
    key: str | None = None,
    budget: int = 10_000,
) -> BrowsePage:
    log = stream_log(stream)
    wanted_rk = None if routing_key is None else routing_key.encode()
    wanted_key = None if key is None else key.encode()
    cut, examined = dict(start), 0
    events: list[dict] = []
    while len(events) < limit and examined < budget:
        records, next_cut = log.read(
            cut, min(1000, budget - examined) if (wanted_rk or wanted_key) else limit - len(events)
        )
        if not records:
            return BrowsePage(events, next_cut, examined, at_tail=True)
        for i, r in enumerate(records):
            examined += 1
            if wanted_rk is not None and r.record.routing_key != wanted_rk:
                continue
            if wanted_key is not None and r.record.key != wanted_key:
                continue
            events.append(event_json(r))
            if len(events) == limit:  # stop here: the next page starts after this event
                for later in records[i + 1 :]:
                    next_cut[later.segment] = min(next_cut[later.segment], later.record.offset)
                break
        cut = next_cut
    tail = log.tail_cut()
    return BrowsePage(events, cut, examined, at_tail=all(cut.get(s, 0) >= t for s, t in tail.items()))
