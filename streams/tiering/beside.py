"""A stream's files beside its log in the tier (`TierFile`): the delayed index's snapshots and the
compacted view's generation, copied as they appear, their copies deleted as their files go
(never when the whole directory went: a lost disk), and brought back by a restore."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from django.conf import settings

from store.files import write_atomically
from streams.models import Stream, TierFile
from streams.tiering.tier import Recorded, recorded_for, tier

log = logging.getLogger(__name__)


# the directories under CBR_DATA_DIR that hold a stream's files beside its log (`TierFile`): the
# delayed index's snapshots (streams.delaying.buckets) and the compacted view's generations
# (compaction.runs), each file written once under its name
BESIDE = ("delayed", "compacted")


def beside_files(stream: Stream) -> dict[str, Path]:
    """The stream's files beside its log, by their path under CBR_DATA_DIR (temporaries, whose
    names start with a dot, left out)."""
    root = Path(settings.CBR_DATA_DIR)
    out = {}
    for top in BESIDE:
        for dirpath, dirnames, names in os.walk(root / top / stream.storage_key):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in names:
                if not name.startswith("."):
                    path = Path(dirpath) / name
                    out[str(path.relative_to(root))] = path
    return out


def beside_key(stream: Stream, path: str) -> str:
    """A file's key in the tier: the stream's storage key first (its objects share one prefix),
    then the kind of file and the rest of its path (`<storage key>/delayed/<name>.parquet`)."""
    top, _, rest = path.partition("/")
    return f"{stream.storage_key}/{top}/{rest.partition('/')[2]}"


def _beside_plan(stream: Stream, recorded: Recorded) -> tuple[dict[str, Path], dict[str, TierFile]]:
    """The files beside the log to copy (by path), and the recorded copies whose file went here
    while its directory stayed (by key)."""
    root = Path(settings.CBR_DATA_DIR)
    local = beside_files(stream)
    rows = {r.path: r for r in recorded.files}
    copy = {path: file for path, file in local.items() if path not in rows}
    gone = {
        beside_key(stream, path): row
        for path, row in rows.items()
        if path not in local and (root / path.split("/", 2)[0] / stream.storage_key).is_dir()
    }
    return copy, gone


def beside_changes(stream: Stream, recorded: Recorded) -> bool:
    copy, gone = _beside_plan(stream, recorded)
    return bool(copy or gone)


def mirror_beside(stream: Stream, recorded: Recorded | None = None) -> tuple[int, int]:
    """Copy the stream's files beside its log that the tier does not hold yet (each verified, as a
    chunk is), and delete the copies of those that went here (a bucket merged, a generation
    replaced), unless the whole directory went (a lost disk: the copies are what a restore brings
    back). Local copies stay: they are what reads and recovery use. Files copied and bytes."""
    target = tier()
    if target is None:
        return 0, 0
    recorded = recorded or recorded_for([stream])[stream.pk]
    copy, gone = _beside_plan(stream, recorded)
    made = []
    for path, file in copy.items():
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            continue  # replaced meanwhile
        stored = target.put(beside_key(stream, path), data)
        target.get(stored.key, stored.crc32c)
        made.append(TierFile(stream=stream, path=path, size=stored.size, crc32c=stored.crc32c))
    TierFile.objects.bulk_create(made, ignore_conflicts=True)
    if gone:
        refused = set(target.delete_many(list(gone)))
        TierFile.objects.filter(pk__in=[r.pk for k, r in gone.items() if k not in refused]).delete()
    recorded.files = [f for f in recorded.files if beside_key(stream, f.path) not in gone] + made
    return len(made), sum(f.size for f in made)


def restore_beside(stream: Stream) -> int:
    """Bring back the stream's files beside its log that are not here (a lost disk), each checked
    against its recorded checksum; how many."""
    target = tier()
    if target is None:
        return 0
    root = Path(settings.CBR_DATA_DIR)
    brought = 0
    for row in TierFile.objects.filter(stream=stream):
        path = root / row.path
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, target.get(beside_key(stream, row.path), row.crc32c))
        brought += 1
    return brought
