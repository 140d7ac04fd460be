"""Reading a stream's compacted view: the current generation's Parquet files, in key order
(each file of a generation is written sorted by key), paged by key."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from django.conf import settings

from compaction.models import CompactedView
from compaction.runs import view_dir
from store.framing import Record
from streams.models import Stream
from streams.wire import datetime_to_ms, record_json


@dataclass
class Page:
    events: list[dict]
    next_after: str | None  # the `after` of the next page; None on the last one


def event_of(row: dict, stream: str) -> dict:
    """A view row of `stream` (`scope/name`) as every answer carries an event (docs/api.md,
    `streams.wire`: the same fields and time format as a read of the live log), plus
    `tombstone`."""
    return {**record_json(row["segment"], _record(row), stream), "tombstone": not row["payload"]}


def read_view(stream: Stream, view: CompactedView, key: str | None, after: str | None, limit: int) -> Page:
    dataset = ds.dataset(str(view_dir(stream) / view.directory), format="parquet")
    condition = None
    if key is not None:
        condition = pc.field("key") == key.encode()
    elif after is not None:
        condition = pc.field("key") > after.encode()
    # every file of a generation is in key order, a key in one file only
    # (`spark_tasks.compaction_job.in_key_order`): the page is the first rows of every file's
    # scan, merged (row groups wholly before `after` are skipped by their statistics)
    heads = [fragment.head(limit + 1, filter=condition) for fragment in dataset.get_fragments()]
    heads = [h for h in heads if h.num_rows]
    rows = pa.concat_tables(heads).sort_by("key").slice(0, limit + 1).to_pylist() if heads else []
    more = len(rows) > limit
    rows = rows[:limit]
    events = [event_of(r, stream.full_name) for r in rows]
    return Page(events, rows[-1]["key"].decode(errors="replace") if more and rows else None)


# -- a reader group reading the view (`read_compacted`) ----------------------------------------

_BY_OFFSET: dict[str, object] = {}  # the last generations read, sorted by (segment, offset)


def _by_offset(stream: Stream, view: CompactedView):
    """The generation's rows sorted by position, kept in memory per process (the last two
    generations read): a group reads the view in offset order."""
    path = str(view_dir(stream) / view.directory)
    table = _BY_OFFSET.get(path)
    if table is None:
        table = (
            ds.dataset(path, format="parquet").to_table().sort_by([("segment", "ascending"), ("offset", "ascending")])
        )
        if len(_BY_OFFSET) >= 2:
            _BY_OFFSET.pop(next(iter(_BY_OFFSET)))
        _BY_OFFSET[path] = table
    return table


def _record(row: dict) -> Record:
    """A view row as a record; a value above the JSON limit (`CBR_MAX_EVENT_BYTES`: a large
    event's) as a large event's, its payload served at its URL (`payload_in_view` once the log
    no longer holds it)."""
    payload = row["payload"] or b""
    large = len(payload) > settings.CBR_MAX_EVENT_BYTES
    return Record(
        row["offset"],
        datetime_to_ms(row["published_at"]),
        None,
        0,
        row["routing_key"],
        row["key"],
        dict(row["headers"]) if row["headers"] else None,
        b"" if large else payload,
        False,
        len(payload) if large else None,
    )


def payload_in_view(stream: Stream, segment: str, offset: int) -> bytes | None:
    """The payload of the event at (`segment`, `offset`) as the stream's current compacted view
    keeps it (the latest value of its key, kept past the live log's retention); None when the
    view does not hold that event."""
    view = CompactedView.objects.filter(stream=stream).first()
    if view is None:
        return None
    dataset = ds.dataset(str(view_dir(stream) / view.directory), format="parquet")
    found = dataset.to_table(
        columns=["payload"], filter=(pc.field("segment") == segment) & (pc.field("offset") == offset)
    )
    return found.column(0)[0].as_py() or b"" if found.num_rows else None


def segment_records(stream: Stream, view: CompactedView, segment: str, start: int, limit: int) -> list:
    """Up to `limit` of the view's events on a segment from offset `start`, in offset order."""
    table = _by_offset(stream, view)
    part = table.filter((pc.field("segment") == segment) & (pc.field("offset") >= start)).slice(0, limit)
    return [_record(r) for r in part.to_pylist()]


def records_at(stream: Stream, view: CompactedView, segment: str, offsets: list[int]) -> dict:
    """The view's events at these offsets of a segment (redeliveries of view events)."""
    if not offsets:
        return {}
    table = _by_offset(stream, view)
    part = table.filter((pc.field("segment") == segment) & pc.field("offset").isin(offsets))
    return {r["offset"]: _record(r) for r in part.to_pylist()}


class Views:
    """What `groups.consuming.reading` reads a `read_compacted` group's events from below a
    view's horizon (registered by `CompactionConfig.ready`)."""

    def current(self, stream_ids: set[int]) -> dict[int, CompactedView]:
        return {v.stream_id: v for v in CompactedView.objects.filter(stream_id__in=stream_ids)}

    segment_records = staticmethod(segment_records)
    records_at = staticmethod(records_at)
