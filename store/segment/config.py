"""How a store's segments are laid out and made durable: chunk size and age, fsync mode, index
spacing, and where released chunks are read from (the tier's URL, and the local cache of tiered
chunks: its directory and bound). It holds the settings and refuses nonsense; it must never act
on them.
"""

from __future__ import annotations

from dataclasses import dataclass

FSYNC_MODES = ("batch", "always", "never")


@dataclass(frozen=True, slots=True)
class StoreConfig:
    chunk_bytes: int = 16 * 1024 * 1024
    chunk_seconds: int = 3600
    fsync: str = "batch"
    index_interval_bytes: int = 4096
    tier_url: str = ""  # long-term storage (store/tier/); empty: none, every chunk is local
    tier_cache_dir: str = ""
    tier_cache_bytes: int = 1024 * 1024 * 1024
    # a released chunk smaller than this is always fetched whole (a ranged read costs a request
    # as a whole one does); a larger one by range for a read of one record or from its second half
    tier_ranged_min_bytes: int = 1024 * 1024

    def __post_init__(self) -> None:
        if self.fsync not in FSYNC_MODES:
            raise ValueError(f"fsync must be one of {FSYNC_MODES}, not {self.fsync!r}")
        if self.chunk_bytes < 1024:
            raise ValueError("chunk_bytes must be at least 1024")
        if self.tier_cache_bytes < 0:
            raise ValueError("tier_cache_bytes must not be negative")
