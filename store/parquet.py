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

Executors that do not see the data directory (`tier_copy_facts`) take a chunk from the tier
alone: its offloaded copy, or a copy made from the chunk's object and written to the tier under
the copy's own key (create-once), so that the run's job reads every input from the tier.
"""

from __future__ import annotations

import io
import os
from datetime import datetime
from pathlib import Path
from typing import NotRequired, TypedDict

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from store import framing
from store.tier.base import TierConflict, checksum
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


class TierCopy(TypedDict):
    tier_url: str
    segment: str
    chunk_key: str  # the chunk's object and its CRC-32C as recorded at upload
    chunk_crc32c: str
    parquet_key: str  # its columnar copy's key (`store.offload.tier_key`)
    parquet_crc32c: str | None  # recorded at upload; None: no copy there yet (this task makes it)


class CopyFacts(TypedDict):
    copy: str  # the Parquet copy's path (or, from `tier_copy_facts`, its key in the tier)
    made: bool  # whether this call made it
    events: int
    keyless: int  # events without a key
    bytes: int  # payload bytes
    newest_ms: int | None  # the latest publish time (None: statistics missing)
    size: NotRequired[int]  # from `tier_copy_facts`: the copy's size and CRC-32C in the tier
    crc32c: NotRequired[str]


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
    return _facts(pq.ParquetFile(copy), str(copy), made)


def tier_copy_facts(task: TierCopy) -> CopyFacts:
    """`copy_facts` for an executor that does not see the data directory: the chunk's columnar
    copy read from the tier (checked against its recorded CRC-32C), or made from the chunk's
    object (checked too) and written to the tier under the copy's key. Any attempt may run it
    again: the copy made from the same chunk is the same table, and a key written once keeps its
    first bytes (`Tier.put` refuses other ones: then the first copy is the one taken)."""
    tier = tier_for(task["tier_url"])
    if tier is None:
        raise ValueError("tier_copy_facts needs a tier_url")
    recorded = task["parquet_crc32c"]
    made = recorded is None
    if recorded is None:
        buffer = io.BytesIO()
        table = chunk_bytes_to_table(tier.get(task["chunk_key"], task["chunk_crc32c"]), task["segment"])
        pq.write_table(table, buffer, compression="zstd")
        data = buffer.getvalue()
        try:
            crc = tier.put(task["parquet_key"], data).crc32c
        except TierConflict:  # an earlier attempt's copy, written whole (create-once): that one
            data = tier.get(task["parquet_key"])
            crc = checksum(data)
    else:
        crc = recorded
        data = tier.get(task["parquet_key"], crc)
    facts = _facts(pq.ParquetFile(io.BytesIO(data)), task["parquet_key"], made)
    return {**facts, "size": len(data), "crc32c": crc}


def _facts(parquet: pq.ParquetFile, copy: str, made: bool) -> CopyFacts:
    """What a copy holds, from its metadata and its `payload_size` column."""
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
    return CopyFacts(copy=copy, made=made, events=meta.num_rows, keyless=keyless, bytes=size, newest_ms=newest)


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
