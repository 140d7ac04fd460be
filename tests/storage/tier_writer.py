"""A process that writes one large object to a tier and says when it has started, for the tests
that kill it mid-upload (test_tier_killed.py).

Usage: python tier_writer.py file <root> <key> <MiB>
       python tier_writer.py s3 <bucket> <key> <MiB>   (endpoint and credentials: AWS_* variables)
"""

import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from store.tier.files import FileTier  # noqa: E402  (the project, from the path above)
from store.tier.s3 import S3Tier  # noqa: E402


class Slow(io.RawIOBase):
    """The body of a PUT, read a MiB at a time with a pause between."""

    def __init__(self, data: bytes):
        self._data = io.BytesIO(data)
        self._size = len(data)
        self._sent, self._said = 0, False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._data.seek(offset, whence)

    def tell(self) -> int:
        return self._data.tell()

    def read(self, size: int = -1) -> bytes:
        time.sleep(0.01)
        chunk = self._data.read(min(size if size > 0 else 2**20, 2**20))
        self._sent += len(chunk)
        if self._sent >= 2**24 and not self._said:  # 16 MiB on their way: the test may kill now
            print("sending", flush=True)
            self._said = True
        return chunk

    def __len__(self) -> int:
        return self._size


def main() -> None:
    kind, where, key, mib = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    tier = FileTier(where) if kind == "file" else S3Tier(where)
    data = bytes(range(256)) * (mib * 4096)
    if kind == "s3":  # a loopback upload is over in a blink: the body goes slowly, to be killed in it
        put_object = tier.client.put_object
        tier.client.put_object = lambda **kw: put_object(**{**kw, "Body": Slow(kw["Body"])})
    print("writing", flush=True)
    tier.put(key, data)
    print("written", flush=True)


if __name__ == "__main__":
    main()
