"""The filesystem steps the store's modules share: a write that finishes or fails whole, a read of
a small file without a buffered file object, a directory's fsync and the durable replacement of
a file. This module knows nothing of what the bytes mean, and must never learn a record's, a
chunk's or a slot's format: those stay with the modules that own them. No Django, no database.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path


def pwrite_all(fd: int, data: bytes, pos: int) -> None:
    """`pwrite` until every byte is written: a write that meets a full disk first returns short
    (what fitted) and only the next one fails, so one unchecked call can leave a torn record."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, pos)
        if written <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]
        pos += written


def pread_full(fd: int, size: int, at: int) -> bytes:
    """`size` bytes of the file from `at`, fewer only where it ends (as a buffered file's read):
    pread may return less than asked for."""
    data = os.pread(fd, size, at)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, at + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def read_small(path: str, size: int, at: int | None = None) -> bytes | None:
    """A small file's bytes (None if it does not exist), without a buffered file object. Read
    whole (`at` None), one byte more than `size`: a longer file is not a valid record; read at a
    slot (`at`), exactly `size` bytes (fewer: the slot was never written whole)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return os.read(fd, size + 1) if at is None else os.pread(fd, size, at)
    finally:
        os.close(fd)


def fsync_dir(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` durably: a temporary file, fsync, rename, fsync of the directory."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
