"""The on-disk record format of a chunk file: framing, encoding, decoding and scanning.

A chunk file is a 32-byte header followed by framed records. Each record is

    u32 body_len | u32 crc32c(body) | body

and the body is a fixed 45-byte part followed by the variable fields:

    u8  flags            bit 0: last record of a publish batch; bit 1: the headers hold the
                         event's own time to live (`domain.ttl.TTL_HEADER`); bit 2: a large
                         event (store/large.py), whose payload the read path passes over
    u64 offset           0-based position in the segment
    i64 published_ms     epoch milliseconds
    i64 deliver_at_ms    epoch milliseconds, -1 when the event is not delayed
    u64 cum_size         payload bytes of the segment before this record (size_till)
    u16 routing_key_len  0xFFFF when absent
    u16 key_len          0xFFFF when absent (the compaction key)
    u32 headers_len      JSON object (orjson), 0 when absent
    u32 payload_len
    routing_key | key | headers | payload

Everything is little-endian. The CRC covers the whole body, so a torn or corrupt record is detected
and recovery keeps only the prefix of whole batches. This module never touches the filesystem
beyond the buffers it is given.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, cast

import orjson
from crc32c import crc32c

from domain.events import EventIn
from domain.ttl import TTL_HEADER, own_ttl_ms
from store.large import SpooledPayload

CHUNK_MAGIC = b"CBRCHNK1"
CHUNK_VERSION = 1
# magic, version, reserved, base_offset, base_cum_size
CHUNK_HEADER = struct.Struct("<8sIIQQ")
CHUNK_HEADER_SIZE = CHUNK_HEADER.size  # 32

FRAME = struct.Struct("<II")
FRAME_SIZE = FRAME.size
BODY = struct.Struct("<BQqqQHHII")
BODY_SIZE = BODY.size  # 45
RECORD_OVERHEAD = FRAME_SIZE + BODY_SIZE
_RECORD_HEAD = struct.Struct("<IIBQqqQHHII")  # FRAME then BODY: a record's first 53 bytes
_FRAME_KEYS = struct.Struct("<IIBQqqQ")  # of those, what read_frames looks at (the rest skipped)
_LENGTHS = struct.Struct("<II")  # headers_len, payload_len: the last 8 bytes of the fixed body

FLAG_BATCH_END = 1
FLAG_TTL = 2
FLAG_LARGE = 4
LARGE_SIZE = struct.Struct("<Q")  # what a read's binary answer carries of a large event's payload
ABSENT = 0xFFFF
# A body larger than this is not something CBR ever writes: a length above it is corruption.
MAX_BODY_BYTES = 256 * 1024 * 1024


class Record(NamedTuple):
    """One event as stored, with its position."""

    offset: int
    published_ms: int
    deliver_at_ms: int | None
    cum_size: int
    routing_key: bytes | None
    key: bytes | None
    headers: dict | None
    payload: bytes
    batch_end: bool
    # a large event's payload size: its payload is read by range (`Segment.large_payload`), and
    # `payload` holds it only where a whole chunk was decoded (`iter_records`); None otherwise
    large_size: int | None = None

    @property
    def ttl_ms(self) -> int | None:
        """The event's own time to live (ms), None when it has none (`domain.ttl`)."""
        return own_ttl_ms(self.headers)


@dataclass(frozen=True, slots=True)
class ScanResult:
    """What a scan of a record buffer found: the whole batches and where they end."""

    valid_len: int  # bytes from the start of the buffer covered by whole batches
    next_offset: int  # offset after the last kept record
    cum_size: int  # cumulative payload size after the last kept record
    records: int  # records kept
    clean: bool  # True when the buffer ended exactly at the end of a whole batch


def encode_chunk_header(base_offset: int, base_cum_size: int) -> bytes:
    return CHUNK_HEADER.pack(CHUNK_MAGIC, CHUNK_VERSION, 0, base_offset, base_cum_size)


def decode_chunk_header(data: bytes) -> tuple[int, int]:
    """Return (base_offset, base_cum_size); ValueError when the header is not a chunk header."""
    if len(data) < CHUNK_HEADER_SIZE:
        raise ValueError("chunk header is torn")
    magic, version, _, base_offset, base_cum = CHUNK_HEADER.unpack_from(data, 0)
    if magic != CHUNK_MAGIC or version != CHUNK_VERSION:
        raise ValueError("not a CBR chunk file")
    return base_offset, base_cum


COPY_BELOW = 4096  # a payload this small is copied into its record (one part, one CRC call)


def encode_batch(
    events: list[EventIn], first_offset: int, cum_size: int, published_ms: int
) -> tuple[bytes, list[int], int]:
    """Frame a batch of events starting at `first_offset`.

    Returns (bytes, relative file positions of each record within the bytes, cum_size after).
    The last record carries the batch-end flag, so recovery can keep whole batches only.
    """
    parts, positions, _, cum_size = frame_batch(events, first_offset, cum_size, published_ms)
    return b"".join(parts), positions, cum_size


def frame_batch(
    events: list[EventIn], first_offset: int, cum_size: int, published_ms: int
) -> tuple[list[bytes], list[int], int, int]:
    """`encode_batch` as the records' parts, not yet joined (a large batch is written from them
    as they are: joined, it would be held twice). Returns (parts, relative positions, their total
    length, cum_size after)."""
    if type(events[0][0]) is SpooledPayload:
        return _frame_large(events, first_offset, cum_size, published_ms)
    parts: list[bytes] = []
    positions: list[int] = []
    pos = 0
    pack_body = BODY.pack
    pack_frame = FRAME.pack
    append_part = parts.append
    append_pos = positions.append
    offset = first_offset
    for rk, key, headers_dict, payload, deliver_at in ((ev[1], ev[2], ev[3], ev[0], ev[4]) for ev in events):
        p_len = len(payload)
        fixed = pack_body(
            FLAG_TTL if headers_dict and TTL_HEADER in headers_dict else 0,
            offset,
            published_ms,
            -1 if deliver_at is None else deliver_at,
            cum_size,
            ABSENT if rk is None else len(rk),
            ABSENT if key is None else len(key),
            0,
            p_len,
        )
        plain = rk is None and key is None and not headers_dict  # the common case: payload only
        if not plain:
            headers = orjson.dumps(headers_dict) if headers_dict else b""
            if headers:
                fixed = fixed[:-8] + _LENGTHS.pack(len(headers), p_len)
        if p_len < COPY_BELOW:
            body = fixed + payload if plain else b"".join((fixed, rk or b"", key or b"", headers, payload))
            b_len = len(body)
            append_part(pack_frame(b_len, crc32c(body)))
            append_part(body)
        else:  # a large payload is written from where it is, not copied into its record (the
            # record is three parts: frame, head, payload)
            head = fixed if plain else b"".join((fixed, rk or b"", key or b"", headers))
            b_len = len(head) + p_len
            append_part(pack_frame(b_len, crc32c(payload, crc32c(head))))
            append_part(head)
            append_part(payload)
        append_pos(pos)
        pos += FRAME_SIZE + b_len
        cum_size += p_len
        offset += 1
    # The last record closes the batch: set the flag in its head and frame it again.
    payload = events[-1][0]
    whole = len(payload) < COPY_BELOW
    last = bytearray(parts[-1] if whole else parts[-2])
    last[0] |= FLAG_BATCH_END
    if whole:
        parts[-1] = bytes(last)
        parts[-2] = pack_frame(len(last), crc32c(parts[-1]))
    else:
        parts[-2] = bytes(last)
        parts[-3] = pack_frame(len(last) + len(payload), crc32c(payload, crc32c(parts[-2])))
    return parts, positions, pos, cum_size


def _frame_large(
    events: list[EventIn], offset: int, cum_size: int, published_ms: int
) -> tuple[list, list[int], int, int]:
    """`frame_batch` of a batch of one large event (its payload spooled, `store.large`): flagged
    `FLAG_LARGE` and closing its batch, its CRC read off the spooled payload, and the payload
    itself one of the parts, which the append copies into the chunk (`Segment.append`)."""
    if len(events) != 1:
        raise ValueError("a large event is appended alone")
    payload, rk, key, headers_dict, deliver_at = events[0]
    head = _head(
        FLAG_LARGE | FLAG_BATCH_END, offset, published_ms, deliver_at, cum_size, rk, key, headers_dict, len(payload)
    )
    b_len = len(head) + len(payload)
    parts = [FRAME.pack(b_len, cast(SpooledPayload, payload).crc32c(crc32c(head))), head, payload]
    return parts, [0], FRAME_SIZE + b_len, cum_size + len(payload)


def _head(
    flags: int,
    offset: int,
    published_ms: int,
    deliver_at_ms: int | None,
    cum_size: int,
    rk: bytes | None,
    key: bytes | None,
    headers_dict: dict | None,
    payload_len: int,
) -> bytes:
    """A record's body up to its payload (the TTL flag set from its headers): what a large
    event's record and a record framed again (`frame_record`) are written from."""
    headers = orjson.dumps(headers_dict) if headers_dict else b""
    ttl = FLAG_TTL if headers_dict and TTL_HEADER in headers_dict else 0
    fixed = BODY.pack(
        flags | ttl,
        offset,
        published_ms,
        -1 if deliver_at_ms is None else deliver_at_ms,
        cum_size,
        ABSENT if rk is None else len(rk),
        ABSENT if key is None else len(key),
        len(headers),
        payload_len,
    )
    return b"".join((fixed, rk or b"", key or b"", headers))


def _decode_body(body: memoryview | bytes) -> Record:
    flags, offset, published_ms, deliver_ms, cum_size, rk_len, key_len, h_len, p_len = BODY.unpack_from(body, 0)
    pos = BODY_SIZE
    rk = None
    if rk_len != ABSENT:
        rk = bytes(body[pos : pos + rk_len])
        pos += rk_len
    key = None
    if key_len != ABSENT:
        key = bytes(body[pos : pos + key_len])
        pos += key_len
    headers = None
    if h_len:
        headers = orjson.loads(body[pos : pos + h_len])
        pos += h_len
    payload = bytes(body[pos : pos + p_len])
    return Record(
        offset,
        published_ms,
        None if deliver_ms < 0 else deliver_ms,
        cum_size,
        rk,
        key,
        headers,
        payload,
        bool(flags & FLAG_BATCH_END),
        p_len if flags & FLAG_LARGE else None,
    )


def _frame_at(buf: memoryview, pos: int) -> memoryview | None:
    """The body of the record framed at `pos`, or None if it is torn or corrupt."""
    end = len(buf)
    if pos + FRAME_SIZE > end:
        return None
    body_len, crc = FRAME.unpack_from(buf, pos)
    if body_len < BODY_SIZE or body_len > MAX_BODY_BYTES:
        return None
    start = pos + FRAME_SIZE
    if start + body_len > end:
        return None
    body = buf[start : start + body_len]
    if crc32c(body) != crc:
        return None
    return body


def iter_records(data: bytes | memoryview, start: int = 0, verify: bool = True) -> Iterator[tuple[int, Record]]:
    """Yield (position, record) for each whole record from `start`; stops at the first bad one."""
    buf = memoryview(data)
    pos = start
    end = len(buf)
    while pos + FRAME_SIZE <= end:
        if verify:
            body = _frame_at(buf, pos)
            if body is None:
                return
            body_len = len(body)
        else:
            body_len = FRAME.unpack_from(buf, pos)[0]
            if pos + FRAME_SIZE + body_len > end:
                return
            body = buf[pos + FRAME_SIZE : pos + FRAME_SIZE + body_len]
        yield pos, _decode_body(body)
        pos += FRAME_SIZE + body_len


def read_records(data: bytes, min_offset: int = 0, limit: int = 1 << 62) -> tuple[list[Record], int]:
    """The verified records framed from the start of `data` whose offset is at least `min_offset`,
    at most `limit` of them, and the bytes consumed (to the end of the last record looked at).
    Stops at the first torn or corrupt record, as `iter_records` does; the same records, decoded
    without a generator or a call per record (the read path decodes thousands per request)."""
    buf = memoryview(data)
    end = len(data)
    unpack_record = _RECORD_HEAD.unpack_from
    out: list[Record] = []
    append = out.append
    new = tuple.__new__  # Record(...) without its Python-level __new__: a third of the cost
    pos = 0
    while pos + RECORD_OVERHEAD <= end and len(out) < limit:
        # the frame and the body's fixed part in one unpack (a record shorter than that is torn
        # or corrupt, as is one whose length or CRC does not hold)
        body_len, crc, flags, offset, published_ms, deliver_ms, cum_size, rk_len, key_len, h_len, p_len = unpack_record(
            data, pos
        )
        start = pos + FRAME_SIZE
        stop = start + body_len
        if flags & FLAG_LARGE:  # its head, its payload passed over (it may lie beyond `data`)
            rec = _large_head(data, pos)
            if rec is None:
                break
            pos = stop
            if offset >= min_offset:
                append(rec)
            continue
        if body_len < BODY_SIZE or body_len > MAX_BODY_BYTES or stop > end or crc32c(buf[start:stop]) != crc:
            break
        pos = stop
        if offset < min_offset:
            continue
        at = start + BODY_SIZE
        rk = key = headers = None
        if rk_len != ABSENT:
            rk = data[at : at + rk_len]
            at += rk_len
        if key_len != ABSENT:
            key = data[at : at + key_len]
            at += key_len
        if h_len:
            headers = orjson.loads(buf[at : at + h_len])
            at += h_len
        append(
            new(
                Record,
                (
                    offset,
                    published_ms,
                    None if deliver_ms < 0 else deliver_ms,
                    cum_size,
                    rk,
                    key,
                    headers,
                    data[at : at + p_len],
                    bool(flags & FLAG_BATCH_END),
                    None,
                ),
            )
        )
    return out, pos


def _large_head(data: bytes, pos: int) -> Record | None:
    """The large event framed at `pos`, its payload left where it is (`payload` empty,
    `large_size` its size), or None when its head is not all in `data`. Its CRC, which covers
    the payload, is checked where the payload is read (`Segment.large_payload`)."""
    if pos + RECORD_OVERHEAD > len(data):
        return None
    body_len, _, flags, offset, published_ms, deliver_ms, cum_size, rk_len, key_len, h_len, p_len = (
        _RECORD_HEAD.unpack_from(data, pos)
    )
    head_len = BODY_SIZE + (0 if rk_len == ABSENT else rk_len) + (0 if key_len == ABSENT else key_len) + h_len
    if body_len > MAX_BODY_BYTES or head_len + p_len != body_len or pos + FRAME_SIZE + head_len > len(data):
        return None
    return _decode_body(memoryview(data)[pos + FRAME_SIZE : pos + FRAME_SIZE + head_len])  # (the payload: none of it)


class Frame(NamedTuple):
    """A verified record left in its stored form: where its frame (length, CRC, body) lies in
    `data`, and the fields a read looks at before it answers. A read answered in binary sends the
    frames as they are (streams.wire); `record()` decodes one where the fields are wanted."""

    offset: int
    deliver_at_ms: int | None
    cum_size: int
    data: bytes
    start: int  # of the frame, in data
    stop: int
    published_ms: int
    ttl_ms: int | None  # the event's own time to live (`domain.ttl`), read only where it has one

    def record(self) -> Record:
        return _decode_body(memoryview(self.data)[self.start + FRAME_SIZE : self.stop])


def read_frames(data: bytes, min_offset: int = 0, limit: int = 1 << 62) -> tuple[list[Frame | Record], int]:
    """`read_records`, the records left as frames: each verified and its offset and delivery
    time read, nothing else decoded or copied; a large event's head decoded (a `Record`)."""
    buf = memoryview(data)
    end = len(data)
    unpack_record = _FRAME_KEYS.unpack_from
    out: list[Frame | Record] = []
    append = out.append
    new = tuple.__new__
    pos = 0
    while pos + RECORD_OVERHEAD <= end and len(out) < limit:
        body_len, crc, flags, offset, published_ms, deliver_ms, cum_size = unpack_record(data, pos)
        start = pos + FRAME_SIZE
        stop = start + body_len
        if flags & FLAG_LARGE:  # decoded, its payload passed over: never sent as it is stored
            rec = _large_head(data, pos)
            if rec is None:
                break
            pos = stop
            if offset >= min_offset:
                append(rec)
            continue
        if body_len < BODY_SIZE or body_len > MAX_BODY_BYTES or stop > end or crc32c(buf[start:stop]) != crc:
            break
        if offset >= min_offset:
            ttl = _decode_body(buf[start:stop]).ttl_ms if flags & FLAG_TTL else None
            append(
                new(
                    Frame,
                    (offset, None if deliver_ms < 0 else deliver_ms, cum_size, data, pos, stop, published_ms, ttl),
                )
            )
        pos = stop
    return out, pos


def frame_record(rec: Record) -> bytes:
    """A record as it is stored: its frame and body (a record read from elsewhere than a chunk,
    e.g. a compacted view, sent where frames go). A large event's goes with its payload's size
    (a u64) in place of its payload, which its own URL serves (docs/consuming.md)."""
    offset, published_ms, deliver_at_ms, cum_size, rk, key, headers_dict, payload, batch_end, large_size = rec
    if large_size is not None:
        payload = LARGE_SIZE.pack(large_size)
    flags = (FLAG_BATCH_END if batch_end else 0) | (0 if large_size is None else FLAG_LARGE)
    body = _head(flags, offset, published_ms, deliver_at_ms, cum_size, rk, key, headers_dict, len(payload)) + payload
    return FRAME.pack(len(body), crc32c(body)) + body


class FoundRecord(NamedTuple):
    """Where a record lies in its chunk (`find_record`), for a read of its payload by range."""

    offset: int
    large_size: int | None  # its payload's size when it is a large event, else None
    payload_pos: int  # the file position of its payload's first byte
    head_crc: int  # the CRC32C of its body up to its payload (the frame's CRC continues over it)
    crc: int  # the frame's


_FIND_BLOCK = 64 * 1024


def find_record(pread: Callable[[int, int], bytes], pos: int, end: int, offset: int) -> FoundRecord | None:
    """The record of `offset`, walking the frames from file position `pos` (a record's start)
    to `end` by their lengths, reading `_FIND_BLOCK` at a time (`pread(n, at)`): nothing is
    verified or decoded on the way. None when no record there holds it."""
    data, data_at = b"", pos
    while pos + RECORD_OVERHEAD <= end:
        if pos + RECORD_OVERHEAD > data_at + len(data):
            data, data_at = pread(min(_FIND_BLOCK, end - pos), pos), pos
            if len(data) < RECORD_OVERHEAD:
                return None
        body_len, crc, flags, rec_offset, _, _, _, _, _, _, p_len = _RECORD_HEAD.unpack_from(data, pos - data_at)
        if body_len < BODY_SIZE or body_len > MAX_BODY_BYTES or p_len > body_len - BODY_SIZE or rec_offset > offset:
            return None
        if rec_offset == offset:
            head_len = body_len - p_len
            at = pos + FRAME_SIZE - data_at
            head = data[at : at + head_len] if at + head_len <= len(data) else pread(head_len, pos + FRAME_SIZE)
            large = p_len if flags & FLAG_LARGE else None
            return FoundRecord(offset, large, pos + FRAME_SIZE + head_len, crc32c(head), crc)
        pos += FRAME_SIZE + body_len
    return None


def scan(data: bytes | memoryview, start: int, next_offset: int, cum_size: int) -> ScanResult:
    """Walk the records from `start`, keeping only whole batches with consecutive offsets.

    This is recovery: whatever follows the last whole batch (a torn write, a batch cut short by a
    crash, garbage) is reported as not valid, and the caller cuts the file there.
    """
    buf = memoryview(data)
    pos = start
    end = len(buf)
    valid_len, valid_next, valid_cum, kept = start, next_offset, cum_size, 0
    pending = 0
    expect = next_offset
    cum = cum_size
    while pos < end:
        body = _frame_at(buf, pos)
        if body is None:
            break
        flags, offset, _, _, rec_cum, _, _, _, p_len = BODY.unpack_from(body, 0)
        if offset != expect or rec_cum != cum:
            break
        pos += FRAME_SIZE + len(body)
        expect += 1
        cum += p_len
        pending += 1
        if flags & FLAG_BATCH_END:
            valid_len, valid_next, valid_cum = pos, expect, cum
            kept += pending
            pending = 0
    return ScanResult(valid_len, valid_next, valid_cum, kept, valid_len == end)
