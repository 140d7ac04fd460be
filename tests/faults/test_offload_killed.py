"""kill -9 of a process copying a stream's sealed chunks to the tier (`do_offload`, what beat's
round and `POST …/offload/` run), in the middle of its copies: no object in the tier is half
written (each one listed holds its local file's bytes whole), and the next offload, at once (the
dead holder's lease is taken over), copies and records every sealed file exactly once, each
checked against its recorded checksum."""

import os
import signal
import subprocess
import sys
import time

import factories
import pytest
from django.db import connection
from integration.conftest import ROOT, _database_url

from store.offload import sealed_files, tier_key
from store.tier.opening import tier_for
from streams import tiering
from streams.logs import stream_log
from streams.models import TierObject

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

OFFLOAD = """
import django
django.setup()
from streams import tiering
from streams.models import Stream
tiering.do_offload(Stream.objects.get(scope__name="faults", name="offloaded"), all_sealed=True)
print("done")
"""


def test_kill_9_mid_offload_leaves_no_half_object_and_the_next_offload_finishes_once(settings, tmp_path):
    settings.CBR_CHUNK_BYTES = 1024  # ~8 events a chunk: hundreds of files to copy
    settings.CBR_TIER_URL = f"file://{tmp_path}/tier"
    tier_for.cache_clear()
    stream = factories.make_stream("offloaded", scope="faults")
    for _ in range(500):  # a chunk or so each
        factories.publish(stream, 8, b"o" * 100, routing_key=b"k")
    sealed = {tier_key(stream.storage_key, f.segment, f.base, f.kind): f for f in sealed_files(stream_log(stream))}
    assert len(sealed) >= 200
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "cbrweb.settings",
        "DATABASE_URL": _database_url(connection.settings_dict),
        "REDIS_URL": settings.REDIS_URL,
        "CBR_DATA_DIR": str(settings.CBR_DATA_DIR),
        "CBR_CHUNK_BYTES": "1024",
        "CBR_TIER_URL": settings.CBR_TIER_URL,
        "CBR_VAR_DIR": str(tmp_path / "var"),
    }
    tier = tiering.tier()
    proc = subprocess.Popen(
        [sys.executable, "-c", OFFLOAD], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while len(list(tier.list_keys(f"{stream.storage_key}/"))) < 20:
        assert proc.poll() is None, f"the offload ended before it was killed: {proc.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)

    copied = list(tier.list_keys(f"{stream.storage_key}/"))
    assert 20 <= len(copied) < len(sealed)  # killed mid-way
    for key in copied:  # whole, never half: what the tier lists is the local file's bytes
        assert tier.get(key) == sealed[key].path.read_bytes()

    done = tiering.do_offload(stream, all_sealed=True)  # the dead process's lease taken over at once
    assert done.objects == len(sealed)
    rows = list(TierObject.objects.filter(stream=stream))
    assert sorted(tier_key(stream.storage_key, r.segment_id, r.base, r.kind) for r in rows) == sorted(sealed)
    for r in rows:
        key = tier_key(stream.storage_key, r.segment_id, r.base, r.kind)
        assert tier.get(key, r.crc32c) == sealed[key].path.read_bytes()
    assert tiering.do_offload(stream, all_sealed=True).objects == 0  # nothing twice
    tier_for.cache_clear()
