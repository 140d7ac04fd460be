"""The tier `CBR_TIER_URL` names, made."""

from __future__ import annotations

import functools

from store.tier.base import Tier
from store.tier.files import FileTier
from store.tier.s3 import S3Tier
from store.tier.urls import parse_tier_url


def open_tier(url: str | None) -> Tier | None:
    """The tier `url` names (`parse_tier_url`), or None when it is unset or empty."""
    parsed = parse_tier_url(url)
    if parsed is None:
        return None
    if parsed.kind == "file":
        return FileTier(parsed.where)
    return S3Tier(parsed.where, parsed.prefix)


@functools.cache
def tier_for(url: str) -> Tier | None:
    """`open_tier(url)`, made once per process (a tier holds a client and its connections)."""
    return open_tier(url)
