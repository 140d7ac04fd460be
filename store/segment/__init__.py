"""One segment of a stream on disk (`Segment`): its files, sparse index, recovery, appends, reads
and truncation, each in a module of its own (log.py lists them), with its settings and errors.
Other packages import the names below from here; a module inside `store/` imports from the
module that defines the name, never from this one.
"""

from store.segment.append import AppendResult
from store.segment.config import StoreConfig
from store.segment.errors import NO_SPACE_ERRNOS, CorruptSegment, SegmentSealed, StorageFull
from store.segment.log import Segment
from store.segment.reads import SegmentInfo
from store.segment.release import LocalCopyDiffers
from store.segment.restore import SegmentNotLost
from store.segment.truncation import TruncateResult, move_heads

__all__ = [
    "NO_SPACE_ERRNOS",
    "AppendResult",
    "CorruptSegment",
    "LocalCopyDiffers",
    "Segment",
    "SegmentInfo",
    "SegmentNotLost",
    "SegmentSealed",
    "StorageFull",
    "StoreConfig",
    "TruncateResult",
    "move_heads",
]
