"""Long-term storage for streams (docs/design/long-term-storage.md), by purpose: what its parts share
(tier.py), copying sealed chunks and releasing their local copies (offload.py), the files beside
the log (beside.py), deleting copies (deletion.py), and restoring a lost data directory
(restore.py). Other packages import the names below from here; a module inside the package
imports from the module that defines the name. Without a tier every function does nothing."""

from streams.tiering.beside import BESIDE, beside_files, beside_key, mirror_beside, restore_beside
from streams.tiering.deletion import delete_passed, delete_prefix, forget_stream, sweep
from streams.tiering.offload import (
    ROUND_LOCK,
    Offloaded,
    OffloadState,
    Pending,
    copied_for_executors,
    do_offload,
    offload_due,
    offload_lock,
    offload_state,
    pending,
    record_copies,
    release_due,
    tier_usage,
)
from streams.tiering.restore import Known, Restored, SegmentRestored, restore
from streams.tiering.tier import Recorded, publish_counts, recorded_for, tier

__all__ = [
    "BESIDE",
    "ROUND_LOCK",
    "Known",
    "OffloadState",
    "Offloaded",
    "Pending",
    "Recorded",
    "Restored",
    "SegmentRestored",
    "beside_files",
    "copied_for_executors",
    "delete_prefix",
    "beside_key",
    "delete_passed",
    "do_offload",
    "forget_stream",
    "mirror_beside",
    "record_copies",
    "offload_due",
    "offload_lock",
    "offload_state",
    "pending",
    "publish_counts",
    "recorded_for",
    "release_due",
    "restore",
    "restore_beside",
    "sweep",
    "tier",
    "tier_usage",
]
