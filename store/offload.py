"""Copying a stream's sealed files to the tier: which files are sealed (every chunk but a
segment's active one, and the columnar copies beside them), what each is called there, and the
copy itself, verified by reading it back whole. Plain Python: the database's record of what is
where is the caller's (streams.tiering)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from store.store import StreamLog
from store.tier.base import Stored, Tier

KINDS = ("chunk", "parquet")  # what goes to the tier (a chunk's sparse index is rebuilt from it)


@dataclass(frozen=True, slots=True)
class SealedFile:
    """A sealed file of one segment: the chunk holding offsets [base, end), or its columnar copy."""

    segment: str
    base: int
    end: int
    kind: str
    path: Path
    sealed_at: float  # when it was last written (epoch seconds): a chunk is sealed when the next one starts


def tier_key(storage_key: str, segment: str, base: int, kind: str) -> str:
    """An object's key: the stream's directory, the segment, the file's name as on disk."""
    return f"{storage_key}/{segment}/{base:020d}.{kind}"


def sealed_files(log: StreamLog) -> list[SealedFile]:
    """Every sealed chunk of the stream's segments that still holds data, and each one's columnar
    copy where it exists, oldest first in each segment."""
    out = []
    for seg_id in log.held_ids:
        segment = log.segment(seg_id)
        active = segment.committed_tail().active_base
        bases = segment.chunk_bases()
        for base, end in zip(bases, bases[1:]):
            if base >= active:
                break
            for kind in KINDS:
                path = segment.chunk_path(base, kind)
                try:
                    sealed_at = os.stat(path).st_mtime
                except FileNotFoundError:
                    continue  # no columnar copy (yet), or the chunk went with a truncation
                out.append(SealedFile(seg_id, base, end, kind, path, sealed_at))
    return out


def copy_to_tier(tier: Tier, storage_key: str, f: SealedFile) -> Stored | None:
    """Write one sealed file to the tier and read it back whole, checked against the checksum of
    what was sent; None if the file went meanwhile (a truncation deleted it)."""
    try:
        data = f.path.read_bytes()
    except FileNotFoundError:
        return None
    stored = tier.put(tier_key(storage_key, f.segment, f.base, f.kind), data)
    tier.get(stored.key, stored.crc32c)  # TierCorrupt if what landed is not what was sent
    return stored
