"""What a segment raises that its callers act on: a sealed segment (`SegmentSealed`), a damaged
chunk (`CorruptSegment`) and a full filesystem (`StorageFull`, and the errnos that mean one). It
holds the classes only, and must never import the modules that raise them (they all import it).
"""

from __future__ import annotations

import errno
from pathlib import Path


class SegmentSealed(Exception):
    """An append to a segment a scale has sealed (`Segment.seal`): nothing of it was written;
    the writer routes it again by the stream's current segments."""

    def __init__(self, path: Path):
        super().__init__(f"segment {path} is sealed")
        self.path = path


class CorruptSegment(Exception):
    """A sealed chunk failed its CRC check: data on disk is damaged."""


NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class StorageFull(OSError):
    """The store's filesystem has no room left (ENOSPC) or the user's quota is spent (EDQUOT).
    Raised by an append only after its partial write was cut back: nothing of it was committed."""

    def __init__(self, path: Path, cause: OSError):
        super().__init__(cause.errno, f"no space left for {path}: {cause.strerror}")
        self.path = path
