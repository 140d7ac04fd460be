"""A large event's payload on its way into a segment (docs/design/large-events.md): the request's
body written in pieces to an unnamed file beside the segments, then copied into its record by the
append, under the segment's lock, at the speed of the local disk and not of the client. Nothing
here holds more than a piece of the payload in memory. No Django, no database.

A large event is one record like any other (store/framing.py), flagged `FLAG_LARGE`: retention,
truncation, long-term storage and restore see a record and a chunk as they always do. Only the
read path treats it apart: it decodes the record's head and passes over its payload
(`framing.read_records`), whose bytes are then read by range (`Segment.large_payload`)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from crc32c import crc32c

from store.files import pwrite_all

PIECE_BYTES = 1024 * 1024  # what a large payload's copy holds in memory at once


class BodyCutOff(Exception):
    """The body ended before its announced length (the client went away mid-upload)."""

    def __init__(self, got: int, expected: int):
        super().__init__(f"the body ended after {got} of its {expected} bytes")
        self.got = got
        self.expected = expected


class BodyTooLarge(Exception):
    """A body of unannounced length ran past the cap while it was spooled."""

    def __init__(self, cap: int):
        super().__init__(f"the body is over {cap} bytes")
        self.cap = cap


class SpooledPayload:
    """A payload spooled to an unnamed file (gone with its descriptor, even after a crash): its
    `len`, its CRC continued from another's (`crc32c`), its copy into a chunk (`write_to`).
    It may be appended more than once (a publish that met a scale appends again): each use reads
    it from its start."""

    __slots__ = ("_file", "size")

    def __init__(self, file, size: int):
        self._file = file
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:  # an empty large payload is still an event (never falsy as bytes are)
        return True

    def pieces(self, at: int = 0) -> Callable[[], bytes]:
        """A reader of the payload from `at`, one piece per call (b"": the end)."""
        fd = self._file.fileno()

        def next_piece() -> bytes:
            nonlocal at
            data = os.pread(fd, min(PIECE_BYTES, self.size - at), at) if at < self.size else b""
            at += len(data)
            return data

        return next_piece

    def crc32c(self, value: int) -> int:
        """The CRC32C of whatever `value` is the CRC of, followed by this payload."""
        read = self.pieces()
        while piece := read():
            value = crc32c(piece, value)
        return value

    def write_to(self, fd: int, pos: int) -> None:
        """The payload written into file `fd` at `pos`: copied by the kernel where it can
        (`copy_file_range`), else a piece at a time."""
        src = self._file.fileno()
        at = 0
        try:
            while at < self.size:
                n = os.copy_file_range(src, fd, self.size - at, at, pos + at)
                if n <= 0:
                    break
                at += n
        except OSError as exc:
            if exc.errno not in _NO_KERNEL_COPY:
                raise
        read = self.pieces(at)  # the rest (all of it where the kernel could not copy)
        while piece := read():
            pwrite_all(fd, piece, pos + at)
            at += len(piece)

    def close(self) -> None:
        self._file.close()


_NO_KERNEL_COPY = {18, 22, 38, 95}  # EXDEV, EINVAL, ENOSYS, EOPNOTSUPP: copy a piece at a time


def spool(read: Callable[[int], bytes], size: int | None, directory: Path, cap: int) -> SpooledPayload:
    """The body that `read(n)` gives (b"": its end) spooled in pieces under `directory`: `size`
    bytes (`BodyCutOff` when it ends first), or, of unknown size, up to `cap` (`BodyTooLarge` as
    soon as more arrives). The file is unnamed: it is gone when the payload is closed, whatever
    happens to this process."""
    directory.mkdir(parents=True, exist_ok=True)
    file = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115 - the payload owns it (closed by its user)
    try:
        fd = file.fileno()
        got = 0
        limit = cap if size is None else size
        while got < limit:
            piece = read(min(PIECE_BYTES, limit - got))
            if not piece:
                break
            pwrite_all(fd, piece, got)
            got += len(piece)
        if size is None:
            if got == cap and read(1):
                raise BodyTooLarge(cap)
        elif got < size:
            raise BodyCutOff(got, size)
        return SpooledPayload(file, got)
    except BaseException:
        file.close()
        raise


def spool_pieces(pieces: Iterable[bytes], directory: Path) -> SpooledPayload:
    """A payload spooled from its pieces (a large event copied from where a segment holds it:
    a dead letter, a republish)."""
    directory.mkdir(parents=True, exist_ok=True)
    file = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115 - the payload owns it (closed by its user)
    try:
        size = 0
        for piece in pieces:
            pwrite_all(file.fileno(), piece, size)
            size += len(piece)
        return SpooledPayload(file, size)
    except BaseException:
        file.close()
        raise
