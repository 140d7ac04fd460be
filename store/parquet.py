"""The columnar copy of a sealed chunk: one Parquet file beside it, which Spark jobs read.

The copy is written to a temporary name, fsynced and renamed, so a reader sees either no copy or a
whole one; a crash in between leaves only a temporary file that the next attempt replaces. The
chunk file stays the source of truth: the copy can always be made again from it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from store import framing

SCHEMA = pa.schema(
    [
        ("segment", pa.string()),
        ("offset", pa.int64()),
        ("published_at", pa.timestamp("ms", tz="UTC")),
        ("deliver_at", pa.timestamp("ms", tz="UTC")),
        ("cum_size", pa.int64()),
        ("routing_key", pa.binary()),
        ("key", pa.binary()),
        ("headers", pa.map_(pa.string(), pa.string())),
        ("payload", pa.binary()),
        ("payload_size", pa.int64()),
    ]
)


def chunk_to_table(chunk_path: Path, segment_id: str) -> pa.Table:
    data = Path(chunk_path).read_bytes()
    framing.decode_chunk_header(data)
    cols: dict[str, list] = {name: [] for name in SCHEMA.names}
    for _, rec in framing.iter_records(data, framing.CHUNK_HEADER_SIZE):
        cols["segment"].append(segment_id)
        cols["offset"].append(rec.offset)
        cols["published_at"].append(rec.published_ms)
        cols["deliver_at"].append(rec.deliver_at_ms)
        cols["cum_size"].append(rec.cum_size)
        cols["routing_key"].append(rec.routing_key)
        cols["key"].append(rec.key)
        cols["headers"].append(None if rec.headers is None else [(k, str(v)) for k, v in rec.headers.items()])
        cols["payload"].append(rec.payload)
        cols["payload_size"].append(len(rec.payload))
    return pa.table(cols, schema=SCHEMA)


def write_parquet_copy(chunk_path: Path, segment_id: str) -> Path:
    """Write `<base>.parquet` beside a sealed chunk; returns its path."""
    chunk_path = Path(chunk_path)
    target = chunk_path.with_suffix(".parquet")
    tmp = chunk_path.with_name(f".{target.name}.{os.getpid()}.tmp")
    pq.write_table(chunk_to_table(chunk_path, segment_id), tmp, compression="zstd")
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, target)
    return target
