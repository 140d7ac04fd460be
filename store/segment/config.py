"""How a store's segments are laid out and made durable: chunk size and age, fsync mode, index
spacing. It holds the settings and refuses nonsense; it must never act on them.
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

    def __post_init__(self) -> None:
        if self.fsync not in FSYNC_MODES:
            raise ValueError(f"fsync must be one of {FSYNC_MODES}, not {self.fsync!r}")
        if self.chunk_bytes < 1024:
            raise ValueError("chunk_bytes must be at least 1024")
