"""Reading sealed chunks whose local copy went to the tier: the stub a released chunk leaves in
its segment's directory (`TieredStub`), the bounded local cache of whole objects (`TierCache`),
and the bytes a read of one chunk sees (`open_tiered`): the cached copy, a whole object fetched
and checked against its CRC-32C, or, for a read that starts in the chunk's second half or wants
a single record, ranged reads of only the bytes asked for (their records carry their own
checksums). No Django, no database.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from store.files import pread_full
from store.tier.base import Tier, TierError

# what a process's reads of tiered chunks did, by outcome ("hit": the cached copy, "miss": the
# whole object fetched, "ranged": one ranged read, "error:get": the tier refused or did not
# answer): the caller that publishes metrics takes them (`take_counts`)
_COUNTS: Counter[str] = Counter()
_COUNTS_LOCK = threading.Lock()
# where a store whose configuration names no cache directory keeps tiered chunks (the service
# names one under CBR_DATA_DIR: streams.logs)
DEFAULT_CACHE_DIR = os.path.join(tempfile.gettempdir(), "cbr-tier-cache")


@dataclass(frozen=True, slots=True)
class TieredStub:
    """What stands in a segment's directory for a chunk whose local copy was released: where the
    chunk lives in the tier, its size and CRC-32C, and the cumulative size its header holds (so
    that the segment's head and sizes need no fetch). The columnar copy's key, when one was
    offloaded too."""

    key: str
    size: int
    crc32c: str
    cum_size: int
    parquet_key: str | None = None
    parquet_size: int | None = None
    parquet_crc32c: str | None = None

    def pack(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def unpack(cls, data: bytes) -> TieredStub:
        return cls(**json.loads(data))


def count(outcome: str, n: int = 1) -> None:
    with _COUNTS_LOCK:
        _COUNTS[outcome] += n


def take_counts() -> dict[str, int]:
    """What reads of tiered chunks did since the last call (and forget it)."""
    with _COUNTS_LOCK:
        out = dict(_COUNTS)
        _COUNTS.clear()
    return out


class TierCache:
    """Whole tiered objects kept on local disk under `root`, at most `max_bytes` of them: the
    least recently read go first. Files are written to a temporary name and renamed, so a reader
    in another process sees a whole object or none; one evicted while a reader holds it open
    stays readable through that descriptor."""

    def __init__(self, root: Path, max_bytes: int):
        self.root = Path(root)
        self.max_bytes = max_bytes
        self._touched: dict[str, float] = {}  # key -> when this process last marked it read

    def _path(self, key: str) -> Path:
        return self.root / key

    def cached(self, key: str) -> Path | None:
        path = self._path(key)
        now = time.monotonic()
        if now - self._touched.get(key, -1.0) < 1.0 and path.exists():
            return path  # read within the last second: its time is fresh enough for eviction
        try:
            os.utime(path)  # read now: the last to be evicted
        except FileNotFoundError:
            return None
        if len(self._touched) > 65536:
            self._touched.clear()
        self._touched[key] = now
        return path

    def fetch(self, tier: Tier, key: str, crc: str) -> bytes:
        """The whole object from the tier, checked against `crc`, kept here when it fits."""
        data = tier.get(key, crc)
        if 0 < len(data) <= self.max_bytes:
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
            self._evict(keep=path)
        return data

    def usage(self) -> int:
        return sum(size for _, size, _ in self._files())

    def _files(self) -> list[tuple[float, int, Path]]:
        out = []
        for dirpath, _, names in os.walk(self.root):
            for name in names:
                path = Path(dirpath) / name
                try:
                    st = path.stat()
                except FileNotFoundError:
                    continue
                if name.endswith(".tmp") and time.time() - st.st_mtime < 3600:
                    continue  # another process's object on its way in
                out.append((st.st_mtime, st.st_size, path))
        return out

    def _evict(self, keep: Path) -> None:
        files = sorted(self._files())
        total = sum(size for _, size, _ in files)
        for _, size, path in files:
            if total <= self.max_bytes:
                break
            if path == keep:
                continue
            path.unlink(missing_ok=True)
            total -= size


@functools.cache
def cache_for(root: str, max_bytes: int) -> TierCache:
    """One cache object per process and directory."""
    return TierCache(Path(root), max_bytes)


class ChunkBytes:
    """A chunk's bytes as one read sees them: `size`, `pread(n, at)`, `close()`. Local: the file
    (a chunk file, or a cached copy of a tiered one). Otherwise the object's bytes in memory, or
    ranged reads of the tier."""

    def __init__(self, fd: int = -1, data: bytes | None = None, ranged: tuple[Tier, str, int] | None = None):
        self._fd = fd
        self._data = data
        self._ranged = ranged

    @property
    def size(self) -> int:
        if self._fd >= 0:
            return os.fstat(self._fd).st_size
        if self._data is not None:
            return len(self._data)
        assert self._ranged is not None
        return self._ranged[2]

    def pread(self, n: int, at: int) -> bytes:
        if self._fd >= 0:
            return pread_full(self._fd, n, at)
        if self._data is not None:
            return self._data[at : at + n]
        tier, key, size = self._ranged  # type: ignore[misc]
        n = min(n, size - at)
        if n <= 0:
            return b""
        count("ranged")
        try:
            return tier.get(key, start=at, length=n)
        except TierError:
            count("error:get")
            raise

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def open_tiered(
    tier: Tier, cache: TierCache, stub: TieredStub, at: int, whole: bool, ranged_min_bytes: int = 0
) -> ChunkBytes:
    """The bytes of a tiered chunk for a read from file position `at`: the cached copy when there
    is one; else, for a read that wants much of it (`whole`, from its first half) or a chunk
    smaller than `ranged_min_bytes`, the whole object fetched, checked and cached; else ranged
    reads."""
    path = cache.cached(stub.key)
    if path is not None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # evicted by another process just now
            pass
        else:
            count("hit")
            return ChunkBytes(fd=fd)
    if (whole and at <= stub.size // 2) or stub.size < ranged_min_bytes:
        count("miss")
        try:
            return ChunkBytes(data=cache.fetch(tier, stub.key, stub.crc32c))
        except TierError:
            count("error:get")
            raise
    return ChunkBytes(ranged=(tier, stub.key, stub.size))
