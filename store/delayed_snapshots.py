"""Snapshots of sealed delayed-delivery buckets (docs/design/delayed-delivery.md): what survives a restart of the index, so recovery reads snapshots instead of
replaying the stream.

A snapshot is two files in the bucket directory of a stream:
- `<name>.parquet`: the bucket's indexes in order, one row each (`segment_no` says which snapshot
  segment a row belongs to; `deliver_at`, `chunk`, `segment`, `offset`). The same columns the
  Spark job writes, so either may build a bucket.
- `<name>.json`: the metadata: the bucket's chunk range, per segment its time range and count,
  and the CRC32C and size of the Parquet file. Recovery reads this alone to skip due segments.
Both are written durably (temporary file, fsync, rename, fsync of the directory), Parquet
first: a metadata file names a Parquet file that is complete. The caller registers the bucket in
the database only after `write_snapshot` returns. Anything unreadable or not matching its
checksum raises `CorruptSnapshot`, never a partial bucket.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.parquet as pq
from crc32c import crc32c

from domain.delayed import Bucket, Index, SnapshotSegment
from store.files import write_atomically

SCHEMA = pa.schema(
    [
        ("segment_no", pa.int32()),
        ("deliver_at", pa.int64()),
        ("chunk", pa.int64()),
        ("segment", pa.int32()),
        ("offset", pa.int64()),
    ]
)
FORMAT = 1


class CorruptSnapshot(Exception):
    """The snapshot cannot be trusted: its range must be rebuilt by replaying the stream."""


@dataclass(frozen=True)
class SnapshotInfo:
    name: str
    first_chunk: int
    last_chunk: int
    segments: list[dict]  # [{"min": t, "max": t, "count": n}, …]
    parquet_bytes: int

    @property
    def count(self) -> int:
        return sum(s["count"] for s in self.segments)


def bucket_table(bucket: Bucket) -> pa.Table:
    columns: dict[str, list[int]] = {name: [] for name in SCHEMA.names}
    for no, segment in enumerate(bucket.segments):
        for ix in segment.indexes:
            columns["segment_no"].append(no)
            columns["deliver_at"].append(ix.deliver_at)
            columns["chunk"].append(ix.chunk)
            columns["segment"].append(ix.segment)
            columns["offset"].append(ix.offset)
    return pa.table(columns, schema=SCHEMA)


def write_snapshot(directory: Path, name: str, bucket: Bucket) -> SnapshotInfo:
    """One Parquet row group per snapshot segment: a load reads its segment alone."""
    directory.mkdir(parents=True, exist_ok=True)
    sink = pa.BufferOutputStream()
    table = bucket_table(bucket)
    with pq.ParquetWriter(sink, SCHEMA, compression="zstd") as writer:
        start = 0
        for segment in bucket.segments:
            writer.write_table(table.slice(start, len(segment.indexes)))
            start += len(segment.indexes)
    data = sink.getvalue().to_pybytes()
    write_atomically(directory / f"{name}.parquet", data)
    info = SnapshotInfo(
        name=name,
        first_chunk=bucket.first_chunk,
        last_chunk=bucket.last_chunk,
        segments=[{"min": s.min_time, "max": s.max_time, "count": len(s.indexes)} for s in bucket.segments],
        parquet_bytes=len(data),
    )
    meta = {
        "format": FORMAT,
        "first_chunk": info.first_chunk,
        "last_chunk": info.last_chunk,
        "segments": info.segments,
        "parquet_bytes": len(data),
        "parquet_crc32c": crc32c(data),
    }
    write_atomically(directory / f"{name}.json", orjson.dumps(meta))
    return info


def read_metadata(directory: Path, name: str) -> tuple[SnapshotInfo, int]:
    """The metadata and the Parquet file's expected CRC32C."""
    try:
        meta = orjson.loads((directory / f"{name}.json").read_bytes())
        if meta["format"] != FORMAT:
            raise CorruptSnapshot(f"{name}: unknown snapshot format {meta['format']}")
        info = SnapshotInfo(
            name,
            int(meta["first_chunk"]),
            int(meta["last_chunk"]),
            [{"min": int(s["min"]), "max": int(s["max"]), "count": int(s["count"])} for s in meta["segments"]],
            int(meta["parquet_bytes"]),
        )
        return info, int(meta["parquet_crc32c"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorruptSnapshot(f"{name}: metadata unreadable ({exc})") from exc


def _checked_bytes(directory: Path, name: str) -> tuple[SnapshotInfo, bytes]:
    """The metadata and the Parquet file's bytes, once they match its size and CRC32C."""
    info, crc = read_metadata(directory, name)
    try:
        data = (directory / f"{name}.parquet").read_bytes()
    except OSError as exc:
        raise CorruptSnapshot(f"{name}: data unreadable ({exc})") from exc
    if len(data) != info.parquet_bytes or crc32c(data) != crc:
        raise CorruptSnapshot(f"{name}: data does not match its checksum")
    return info, data


def _checked_table(directory: Path, name: str) -> tuple[SnapshotInfo, pa.Table]:
    info, data = _checked_bytes(directory, name)
    try:
        return info, pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as exc:
        raise CorruptSnapshot(f"{name}: not Parquet ({exc})") from exc


_VERIFIED: dict[Path, tuple] = {}  # snapshot files whose checksum this process checked: (size, mtime)


def _verified(directory: Path, name: str) -> SnapshotInfo:
    """The metadata, once the Parquet file's checksum was checked (once per process and file
    version: a load reads one row group, not the whole file)."""
    path = directory / f"{name}.parquet"
    info, crc = read_metadata(directory, name)
    try:
        st = path.stat()
    except OSError as exc:
        raise CorruptSnapshot(f"{name}: data unreadable ({exc})") from exc
    if _VERIFIED.get(path) != (st.st_size, st.st_mtime_ns):
        _checked_bytes(directory, name)  # a file that is not Parquet fails when a segment is read
        if len(_VERIFIED) > 10_000:
            _VERIFIED.clear()
        _VERIFIED[path] = (st.st_size, st.st_mtime_ns)
    return info


_READERS: dict[Path, tuple] = {}  # open Parquet readers: path -> ((size, mtime), info, ParquetFile)
READERS_KEPT = 256


def _reader(directory: Path, name: str) -> tuple[SnapshotInfo, pq.ParquetFile]:
    """The snapshot's metadata and an open Parquet reader, kept per process and file version
    (the checksum checked once when it is opened): a hand-out reads many segments of a file."""
    path = directory / f"{name}.parquet"
    try:
        st = path.stat()
    except OSError as exc:
        raise CorruptSnapshot(f"{name}: data unreadable ({exc})") from exc
    version = (st.st_size, st.st_mtime_ns)
    kept = _READERS.get(path)
    if kept is not None and kept[0] == version:
        return kept[1], kept[2]
    info = _verified(directory, name)
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise CorruptSnapshot(f"{name}: not Parquet ({exc})") from exc
    if parquet.metadata.num_row_groups != len(info.segments):
        raise CorruptSnapshot(f"{name}: not one row group per segment")
    if len(_READERS) >= READERS_KEPT:
        _READERS.pop(next(iter(_READERS)))
    _READERS[path] = (version, info, parquet)
    return info, parquet


def read_segment_columns(directory: Path, name: str, first: int, last: int) -> tuple[list, list, list]:
    """Snapshot segments `first..last` (inclusive) of a snapshot written one row group per
    segment, as three lists in order: delivery times, segments, offsets (what a hand-out
    releases or queues; no `Index` objects)."""
    info, parquet = _reader(directory, name)
    if not 0 <= first <= last < len(info.segments):
        raise CorruptSnapshot(f"{name}: no segments {first}..{last}")
    try:
        table = parquet.read_row_groups(list(range(first, last + 1)), columns=["deliver_at", "segment", "offset"])
        times, segs, offs = (table.column(c).to_numpy().tolist() for c in ("deliver_at", "segment", "offset"))
    except (pa.ArrowException, OSError) as exc:
        raise CorruptSnapshot(f"{name}: segments {first}..{last} unreadable ({exc})") from exc
    if len(times) != sum(s["count"] for s in info.segments[first : last + 1]):
        raise CorruptSnapshot(f"{name}: segments {first}..{last} do not match the metadata")
    return times, segs, offs


def read_segment(directory: Path, name: str, number: int) -> list[Index]:
    """One snapshot segment's indexes, in order (what a load puts into the shared queue)."""
    info = _verified(directory, name)
    try:
        parquet = pq.ParquetFile(directory / f"{name}.parquet")
        if parquet.metadata.num_row_groups == len(info.segments):
            rows = parquet.read_row_group(number).to_pydict()
        else:  # written before one row group per segment
            table = parquet.read()
            rows = table.filter(pa.compute.equal(table["segment_no"], number)).to_pydict()
    except (pa.ArrowException, OSError, IndexError) as exc:
        raise CorruptSnapshot(f"{name}: segment {number} unreadable ({exc})") from exc
    out = [
        Index(at, chunk, seg, offset)
        for at, chunk, seg, offset in zip(
            rows["deliver_at"], rows["chunk"], rows["segment"], rows["offset"], strict=True
        )
    ]
    if number >= len(info.segments) or len(out) != info.segments[number]["count"]:
        raise CorruptSnapshot(f"{name}: segment {number} does not match the metadata")
    return out


def read_snapshot(directory: Path, name: str, skip_due_before: int | None = None) -> Bucket:
    """The bucket as written; with `skip_due_before`, leading segments whose latest time is
    before it are left out (recovery: their events are delivered as ordinary ones)."""
    info, table = _checked_table(directory, name)
    first = 0
    if skip_due_before is not None:
        while first < len(info.segments) and info.segments[first]["max"] < skip_due_before:
            first += 1
    rows = table.to_pydict()
    by_segment: list[list[Index]] = [[] for _ in info.segments]
    for no, at, chunk, seg, offset in zip(
        rows["segment_no"], rows["deliver_at"], rows["chunk"], rows["segment"], rows["offset"], strict=True
    ):
        if no >= first:
            by_segment[no].append(Index(at, chunk, seg, offset))
    if [len(s) for s in by_segment[first:]] != [s["count"] for s in info.segments[first:]]:
        raise CorruptSnapshot(f"{name}: segment counts do not match the metadata")
    segments = [SnapshotSegment(ixs) for ixs in by_segment[first:]]
    return Bucket(info.first_chunk, info.last_chunk, segments)


def delete_snapshot(directory: Path, name: str) -> None:
    """Metadata first: a Parquet file without metadata is an orphan, never a half bucket."""
    for suffix in (".json", ".parquet"):
        with contextlib.suppress(FileNotFoundError):
            (directory / f"{name}{suffix}").unlink()
