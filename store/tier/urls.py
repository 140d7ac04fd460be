"""What `CBR_TIER_URL` names, read without importing any tier's client (the settings check it at
start)."""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import urlsplit


class TierURL(NamedTuple):
    kind: str  # "file" | "s3"
    where: str  # the directory, or the bucket
    prefix: str  # an S3 tier's key prefix ("" for none, and for a file tier)


def parse_tier_url(url: str | None) -> TierURL | None:
    """The tier `url` names, or None when it is unset or empty (everything stays local). A URL of
    another form is a ValueError naming the setting."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise ValueError(f"CBR_TIER_URL: a file tier is file:///absolute/path, not {url!r}")
        return TierURL("file", parts.path, "")
    if parts.scheme == "s3":
        if not parts.netloc:
            raise ValueError(f"CBR_TIER_URL: an S3 tier is s3://bucket/prefix, not {url!r}")
        return TierURL("s3", parts.netloc, parts.path.strip("/"))
    raise ValueError(f"CBR_TIER_URL: {url!r} is neither file:///path nor s3://bucket/prefix")
