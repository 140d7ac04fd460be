"""The interface every tier of long-term storage offers (`Tier`), its errors, and the promises
each kind keeps:

- **Create once**: `put` never leaves a half-written object visible and never overwrites one. A
  second `put` of the same bytes under a key is a no-op (an upload resumed after a crash); of
  other bytes, `TierConflict`.
- **Checked**: `put` answers the object's CRC-32C; `get` of a whole object verifies it against
  the checksum the caller recorded (`TierCorrupt` when it differs). A ranged read is not checked
  here: the records it holds carry their own checksums (store/framing.py).
- **Unreachable is an error of its own** (`TierUnavailable`): callers wait and retry; nothing
  local is affected.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c import crc32c


class TierError(Exception):
    """Something the tier refused or could not do."""


class TierUnavailable(TierError):
    """The tier could not be reached (or answered an error of its own): retry later."""


class TierMissing(TierError):
    """No object under that key."""


class TierConflict(TierError):
    """An object already holds other bytes under that key: a create-once write refused."""


class TierCorrupt(TierError):
    """An object's bytes do not match the checksum recorded when it was written."""


@dataclass(frozen=True, slots=True)
class Stored:
    """An object as written: its key, size in bytes and CRC-32C (as 8 hex digits)."""

    key: str
    size: int
    crc32c: str


def checksum(data: bytes) -> str:
    return f"{crc32c(data):08x}"


class Tier(abc.ABC):
    """Objects by key (`/`-separated, no leading `/`), written once, read whole or by range."""

    url: str
    kind: str  # "file" | "s3"

    @abc.abstractmethod
    def check(self) -> None:
        """TierUnavailable unless the tier answers now; quick (readiness asks it)."""

    @abc.abstractmethod
    def _create(self, key: str, data: bytes, crc: str) -> bool:
        """Write `data` under `key` unless an object is there already; False if one was."""

    @abc.abstractmethod
    def _read(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        """The object's bytes (from `start`, `length` of them or to its end); TierMissing."""

    @abc.abstractmethod
    def size(self, key: str) -> int | None:
        """The object's size, or None when there is none."""

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Delete the object; one that is not there is no error."""

    def delete_many(self, keys: list[str]) -> list[str]:
        """Delete the objects (those not there are no error); the keys the tier refused to
        delete. TierUnavailable when it does not answer (some may be deleted by then)."""
        for key in keys:
            self.delete(key)
        return []

    @abc.abstractmethod
    def list_keys(self, prefix: str = "") -> Iterator[str]:
        """Every key that starts with `prefix` (sweeps: objects no row knows)."""

    def put(self, key: str, data: bytes) -> Stored:
        """Write once (module docstring): the stored object's size and checksum."""
        _check_key(key)
        crc = checksum(data)
        if not self._create(key, data, crc):
            there = self._read(key)
            if there != data:
                raise TierConflict(f"{self.url}: {key} already holds other bytes ({len(there)} bytes)")
        return Stored(key, len(data), crc)

    def get(self, key: str, crc: str | None = None, start: int = 0, length: int | None = None) -> bytes:
        """The object's bytes, or `length` of them from `start`. A whole object read with the
        `crc` recorded at its `put` is verified."""
        _check_key(key)
        data = self._read(key, start, length)
        if crc is not None and start == 0 and length is None and checksum(data) != crc:
            raise TierCorrupt(f"{self.url}: {key} has checksum {checksum(data)}, {crc} was written")
        return data


def _check_key(key: str) -> None:
    parts = key.split("/")
    if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"bad tier key {key!r}")
