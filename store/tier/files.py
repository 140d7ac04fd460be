"""A tier on a mounted file system (`file:///path`): an object is a file under the root, its key
its relative path. Created once by writing a temporary file beside it, syncing it, and linking
it into place (a link never replaces a file that exists), so a crash leaves either no object or
the whole one; temporaries a crash left are swept by `keys` callers as they find them."""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

from store.files import fsync_dir
from store.tier.base import Tier, TierMissing, TierUnavailable

TEMPORARY = ".part-"  # a temporary's name starts so; never a key


class FileTier(Tier):
    kind = "file"

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.url = f"file://{self.root}"

    def check(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise TierUnavailable(f"{self.url}: {e}") from e
        if not os.access(self.root, os.W_OK):
            raise TierUnavailable(f"{self.url}: not writable")

    def _path(self, key: str) -> Path:
        return self.root / key

    def _create(self, key: str, data: bytes, crc: str) -> bool:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(f"{TEMPORARY}{uuid.uuid4().hex}")
            with open(temporary, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(temporary, path)
            except FileExistsError:
                return False
            finally:
                os.unlink(temporary)
            fsync_dir(path.parent)
            return True
        except OSError as e:
            raise TierUnavailable(f"{self.url}: cannot write {key}: {e}") from e

    def _read(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                if length is None:
                    f.seek(start)
                    return f.read()
                return os.pread(f.fileno(), length, start)
        except FileNotFoundError as e:
            if not self.root.is_dir():  # the tier's file system is not mounted: nothing can be said missing
                raise TierUnavailable(f"{self.url}: the tier's directory is not there") from e
            raise TierMissing(f"{self.url}: no object {key}") from e
        except OSError as e:
            raise TierUnavailable(f"{self.url}: cannot read {key}: {e}") from e

    def size(self, key: str) -> int | None:
        try:
            return self._path(key).stat().st_size
        except FileNotFoundError:
            return None
        except OSError as e:
            raise TierUnavailable(f"{self.url}: cannot look at {key}: {e}") from e

    def delete(self, key: str) -> None:
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            if e.errno != errno.ENOENT:
                raise TierUnavailable(f"{self.url}: cannot delete {key}: {e}") from e

    def list_keys(self, prefix: str = "") -> Iterator[str]:
        if not self.root.is_dir():
            return
        for dirpath, _, files in os.walk(self.root):
            for name in files:
                if name.startswith(TEMPORARY):
                    continue
                key = os.path.relpath(os.path.join(dirpath, name), self.root).replace(os.sep, "/")
                if key.startswith(prefix):
                    yield key
