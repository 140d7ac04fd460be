"""One segment of a stream on disk, an append-only sequence of chunk files, as one object:
`Segment`, made of this package's parts, each in the module named for its purpose and each
stating the rules it keeps:

    directory.py    the segment's files, its lock, and its tail and head records where they live
    index.py        each chunk's sparse index, a hint only
    recovery.py     which tail to trust, recovering it after a crash, and making a new chunk
    append.py       appends and rolls
    reads.py        reads of records, sizes and times
    truncation.py   head moves and chunk deletions
    release.py      a sealed chunk's local copy given up for its copy in the tier
    restore.py      a lost segment made again from its chunks in the tier

The tail and head records themselves, and the stream's `ends` file that keeps them, are in
store/ends.py. This module only joins the parts: it must never hold behaviour of its own.
No Django, no database.
"""

from __future__ import annotations

from store.segment.release import SegmentRelease
from store.segment.restore import SegmentRestore
from store.segment.truncation import SegmentTruncation


class Segment(SegmentRestore, SegmentTruncation, SegmentRelease):
    """A segment log. One object per process and directory (see `open_segment`)."""
