"""A writer killed (SIGKILL) in the middle of an upload leaves no object, whole or half, on either
tier, and the upload done again lands whole (store/tier: create-once)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from store.tier.files import TEMPORARY, FileTier
from store.tier.s3 import S3Tier

WRITER = Path(__file__).with_name("tier_writer.py")
MIB = 256  # long enough to be killed mid-way on any machine


def kill_mid_upload(args: list[str], env: dict, mid_way) -> None:
    """Start the writer, wait until its upload is under way (`mid_way()` true, or with None the
    writer's word), kill it."""
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), *args], stdout=subprocess.PIPE, env={**os.environ, **env}, text=True
    )
    assert proc.stdout.readline().strip() == "writing"
    if mid_way is None:  # the writer says when its body is on its way (an S3 PUT)
        assert proc.stdout.readline().strip() == "sending"
        mid_way = lambda: True  # noqa: E731
    deadline = time.monotonic() + 30
    while not mid_way():
        assert proc.poll() is None, "the writer finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def test_a_file_tier_writer_killed_mid_write_leaves_no_object(tmp_path):
    tier = FileTier(tmp_path / "tier")
    part = tmp_path / "tier" / "s1"

    def writing() -> bool:  # its temporary has bytes in it
        return part.is_dir() and any(p.name.startswith(TEMPORARY) and p.stat().st_size for p in part.iterdir())

    kill_mid_upload(["file", str(tmp_path / "tier"), "s1/x.chunk", str(MIB)], {}, writing)
    assert tier.size("s1/x.chunk") is None and list(tier.list_keys()) == []
    data = b"the upload, done again" * 1000
    stored = tier.put("s1/x.chunk", data)
    assert tier.get("s1/x.chunk", stored.crc32c) == data


def test_an_s3_writer_killed_mid_upload_leaves_no_object(s3_server):
    bucket = s3_server.new_bucket()
    client = s3_server.client()
    kill_mid_upload(["s3", bucket, "s1/x.chunk", str(MIB)], s3_server.env, None)
    time.sleep(0.5)  # the server notices the dropped connection
    tier = S3Tier(bucket, client=client)
    assert tier.size("s1/x.chunk") is None and list(tier.list_keys()) == []
    data = b"the upload, done again" * 1000
    stored = tier.put("s1/x.chunk", data)
    assert tier.get("s1/x.chunk", stored.crc32c) == data
