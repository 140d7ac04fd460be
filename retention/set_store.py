"""Where retention sets are kept: one row per stream (`StoredRetentionSet`), its records as one JSON
list, read for a batch of streams in one query and written back in one statement. This module only
moves records between the database and `RetentionRecord`s; what is added or dropped is decided by
`domain.retention_set`, never here.

A stored record is `[recorded_at_us, size_bytes, cut, sizes]`: the time in whole microseconds since
the epoch (exact, unlike a float), `sizes` the size_till of each segment's offset in `cut` (None when
not known), so that a truncation at a recorded cut needs no store read to size it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import orjson
from django.db import connection

from domain.retention_set import RetentionRecord
from retention.models import StoredRetentionSet

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CHUNK = 500  # SQLite's parameter limit


class RetentionSetEntry(NamedTuple):
    """A record as the API and the console show it."""

    recorded_at: datetime
    size_bytes: int
    cut: dict
    sizes: dict | None


def microseconds(at: datetime) -> int:
    return (at - _EPOCH) // timedelta(microseconds=1)


def stored(at: datetime, size: int, cut: dict, sizes: dict | None) -> list:
    """A record as it is stored."""
    return [microseconds(at), size, cut, sizes]


def as_records(rows: list) -> tuple[RetentionRecord, ...]:
    """The records `domain.retention.decide` takes; times divided as `datetime.timestamp` does."""
    make = RetentionRecord._make  # tuple.__new__ itself: the NamedTuple's own __new__ is Python
    return tuple([make((us / 1_000_000, size, cut)) for us, size, cut, _ in rows])


def as_entry(row: list) -> RetentionSetEntry:
    us, size, cut, sizes = row
    return RetentionSetEntry(_EPOCH + timedelta(microseconds=us), size, cut, sizes)


def read_sets(stream_ids: list[int]) -> dict[int, list]:
    """Per stream, its stored records in set order (streams without a stored set are absent)."""
    out: dict[int, list] = {}
    if not stream_ids:
        return out
    table = connection.ops.quote_name(StoredRetentionSet._meta.db_table)
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            # as text, decoded by orjson: the driver's own jsonb decoding is several times slower
            cur.execute(f"SELECT stream_id, records::text FROM {table} WHERE stream_id = ANY(%s)", [list(stream_ids)])
            rows = cur.fetchall()
        else:
            rows = []
            for start in range(0, len(stream_ids), _CHUNK):
                chunk = list(stream_ids[start : start + _CHUNK])
                marks = ", ".join(["%s"] * len(chunk))
                cur.execute(f"SELECT stream_id, records FROM {table} WHERE stream_id IN ({marks})", chunk)
                rows += cur.fetchall()
    for sid, text in rows:
        out[sid] = orjson.loads(text)
    return out


def write_sets(sets: dict[int, list]) -> None:
    """Store each stream's records whole, replacing what was stored: one statement."""
    if not sets:
        return
    table = connection.ops.quote_name(StoredRetentionSet._meta.db_table)
    upsert = "ON CONFLICT (stream_id) DO UPDATE SET records = excluded.records"
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            # the rows as one JSON document (see streams.db.insert_rows: the driver quotes text
            # arrays element by element, slower than the statement itself)
            document = orjson.dumps([[sid, records] for sid, records in sets.items()]).decode()
            cur.execute(
                f"INSERT INTO {table} (stream_id, records) SELECT (e->>0)::bigint, e->1 "
                f"FROM jsonb_array_elements(%s::jsonb) AS e {upsert}",
                [document],
            )
            return
        items = [(sid, orjson.dumps(records).decode()) for sid, records in sets.items()]
        for start in range(0, len(items), _CHUNK):
            chunk = items[start : start + _CHUNK]
            marks = ", ".join(["(%s, %s)"] * len(chunk))
            cur.execute(
                f"INSERT INTO {table} (stream_id, records) VALUES {marks} {upsert}",
                [x for item in chunk for x in item],
            )


def entries(stream) -> list[RetentionSetEntry]:
    """One stream's retention set, oldest first, for the API and the console."""
    return [as_entry(row) for row in read_sets([stream.pk]).get(stream.pk, [])]
