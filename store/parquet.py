"""The columnar copy of a sealed chunk: one Parquet file beside it, which Spark jobs read.

Copies are made where they are needed: a compaction run's Spark job makes the missing ones of
the chunks it is about to read, one Spark task per chunk (`copy_facts`), so their cost is
spread over every executor core; nothing else reads them.

The copy is written to a temporary name, fsynced and renamed, so a reader sees either no copy or a
whole one; a crash in between leaves only a temporary file that the next attempt replaces. The
chunk file stays the source of truth: the copy can always be made again from it.

A chunk released to long-term storage (its `.tiered` stub in place of the file) is read from the
tier by the executor that takes its task: its offloaded copy, or the chunk itself made into one,
checked against the CRC-32C recorded at upload and staged under the task's `staging` directory
for the run's job to read (the caller deletes what it staged when the run ends).
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import TypedDict

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from store import framing
from store.tier.opening import tier_for
from store.tier.reading import TieredStub

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
    return chunk_bytes_to_table(Path(chunk_path).read_bytes(), segment_id)


def chunk_bytes_to_table(data: bytes, segment_id: str) -> pa.Table:
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
    _write_table(chunk_to_table(chunk_path, segment_id), target)
    return target


def _write_table(table: pa.Table, target: Path) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, target)


class ChunkCopy(TypedDict, total=False):
    chunk: str  # the sealed chunk's path  (required)
    segment: str  # its segment's id  (required)
    tier_url: str  # the tier a released chunk is read from
    staging: str  # where a released chunk's copy is put for the job to read


class CopyFacts(TypedDict):
    copy: str  # the Parquet copy's path
    made: bool  # whether this call made it
    events: int
    keyless: int  # events without a key
    bytes: int  # payload bytes
    newest_ms: int | None  # the latest publish time (None: statistics missing)


def copy_facts(task: ChunkCopy) -> CopyFacts:
    """A sealed chunk's Parquet copy, made if it is missing, and what it holds: the events, the
    keyless ones and the payload bytes (what a compaction run reports reading), and its newest
    publish time (whether the chunk is older than the compaction lag). Counted from the copy's
    metadata and its `payload_size` column. The unit of work of the Spark job that makes a
    run's copies; any attempt may run it again (the copy is replaced whole or kept)."""
    chunk = Path(task["chunk"])
    copy = chunk.with_suffix(".parquet")
    made = not copy.exists()
    if made and not chunk.exists() and chunk.with_suffix(".tiered").exists():
        copy, made = _staged_copy(task, chunk)
    elif made:
        write_parquet_copy(chunk, task["segment"])
    parquet = pq.ParquetFile(copy)
    meta = parquet.metadata
    schema = meta.schema.to_arrow_schema()
    key, published = schema.get_field_index("key"), schema.get_field_index("published_at")
    groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
    keyless = sum(group.column(key).statistics.null_count for group in groups)
    newest: int | None = None
    for group in groups:
        stats = group.column(published).statistics
        if stats is None or not stats.has_min_max:
            newest = None
            break
        value = stats.max
        ms = int(value.timestamp() * 1000) if isinstance(value, datetime) else int(value)
        newest = ms if newest is None else max(newest, ms)
    size = pc.sum(parquet.read(columns=["payload_size"]).column(0)).as_py() or 0
    return CopyFacts(copy=str(copy), made=made, events=meta.num_rows, keyless=keyless, bytes=size, newest_ms=newest)


def _staged_copy(task: ChunkCopy, chunk: Path) -> tuple[Path, bool]:
    """The columnar copy of a chunk released to the tier, staged for the run: its offloaded
    copy, or one made from the chunk's bytes; each checked against its recorded CRC-32C."""
    stub = TieredStub.unpack(chunk.with_suffix(".tiered").read_bytes())
    tier = tier_for(task.get("tier_url", ""))
    if tier is None:
        raise FileNotFoundError(f"{chunk} lives in the tier ({stub.key}) and the task names none")
    target = Path(task["staging"]) / f"{stub.key}.parquet"
    if target.exists():
        return target, False
    target.parent.mkdir(parents=True, exist_ok=True)
    if stub.parquet_key is not None:
        data = tier.get(stub.parquet_key, stub.parquet_crc32c)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
        return target, False
    _write_table(chunk_bytes_to_table(tier.get(stub.key, stub.crc32c), task["segment"]), target)
    return target, True
