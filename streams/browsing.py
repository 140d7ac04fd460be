"""Browsing a stream's live log (the console's event browser, a search over the API): a page of
events from a cut, optionally only those a filter keeps (`domain.event_filters`: a routing key, a
compaction key, text in the payload, header values, a condition on a JSON payload). A filtered page reads on through
the log until it has its events or has examined `budget` of them, so a rare key never makes a
page read the whole stream; the page says how many it examined and where to go on from."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from domain.event_filters import EventFilter
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
    where: EventFilter | None = None,
) -> BrowsePage:
    """A page of up to `limit` events from `start` that `where` keeps (and that have the routing
    key or key given), having examined at most `budget` events."""
    log = stream_log(stream)
    wanted = where or EventFilter()
    if routing_key is not None:
        wanted = replace(wanted, routing_key=routing_key.encode())
    if key is not None:
        wanted = replace(wanted, key=key.encode())
    filtering = not wanted.empty
    cut, examined = dict(start), 0
    events: list[dict] = []
    while len(events) < limit and examined < budget:
        records, next_cut = log.read(cut, min(1000, budget - examined) if filtering else limit - len(events))
        if not records:
            return BrowsePage(events, next_cut, examined, at_tail=True)
        for i, r in enumerate(records):
            examined += 1
            rec = r.record
            if filtering and not wanted.keeps(rec.routing_key, rec.key, rec.headers, rec.payload):
                continue
            events.append(event_json(r, stream.full_name))
            if len(events) == limit:  # stop here: the next page starts after this event
                for later in records[i + 1 :]:
                    next_cut[later.segment] = min(next_cut[later.segment], later.record.offset)
                break
        cut = next_cut
    tail = log.tail_cut()
    return BrowsePage(events, cut, examined, at_tail=all(cut.get(s, 0) >= t for s, t in tail.items()))


def between(
    stream: Stream, start: dict[str, int], end: dict[str, int], where: EventFilter | None = None, page: int = 1000
) -> Iterator[dict]:
    """Every event from `start` up to `end` (a cut: each segment's events below its offset) that
    `where` keeps, oldest first across segments, as the API answers them, read `page` at a time:
    an export of any size holds one page in memory."""
    log = stream_log(stream)
    wanted = where or EventFilter()
    cut = dict(start)
    while True:
        records, next_cut = log.read(cut, page)
        for r in records:
            rec = r.record
            if rec.offset < end.get(r.segment, 0) and (
                wanted.empty or wanted.keeps(rec.routing_key, rec.key, rec.headers, rec.payload)
            ):
                yield event_json(r, stream.full_name)
        if not records or all(next_cut.get(seg, 0) >= offset for seg, offset in end.items()):
            return
        cut = next_cut
