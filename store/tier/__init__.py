"""Long-term storage: a second tier for sealed data (chunks, their columnar copies, delayed-index
snapshots, compacted views), so a stream outlives its host's disk (docs/design/long-term-storage.md).

`open_tier(url)` gives the tier `CBR_TIER_URL` names: `file:///path` (a mounted file system,
`files.py`) or `s3://bucket/prefix` (any S3-compatible store, `s3.py`; endpoint, region and
credentials from the standard `AWS_*` variables). Every kind keeps the promises of `base.py`'s
`Tier`. No Django: the store's callers pass the URL in.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from store.tier.base import Stored, Tier, TierConflict, TierCorrupt, TierError, TierMissing, TierUnavailable, checksum
from store.tier.files import FileTier
from store.tier.s3 import S3Tier

__all__ = [
    "FileTier",
    "S3Tier",
    "Stored",
    "Tier",
    "TierConflict",
    "TierCorrupt",
    "TierError",
    "TierMissing",
    "TierUnavailable",
    "checksum",
    "open_tier",
]


def open_tier(url: str | None) -> Tier | None:
    """The tier `url` names, or None when it is unset or empty (everything stays local)."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise ValueError(f"CBR_TIER_URL: a file tier is file:///absolute/path, not {url!r}")
        return FileTier(parts.path)
    if parts.scheme == "s3":
        if not parts.netloc:
            raise ValueError(f"CBR_TIER_URL: an S3 tier is s3://bucket/prefix, not {url!r}")
        return S3Tier(parts.netloc, parts.path.strip("/"))
    raise ValueError(f"CBR_TIER_URL: {url!r} is neither file:///path nor s3://bucket/prefix")
