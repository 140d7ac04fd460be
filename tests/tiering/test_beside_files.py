"""A stream's files beside its log go to long-term storage with its chunks (`TierFile`): the
delayed index's snapshots, each copied once and verified; a copy deleted when its file goes here
(a bucket merged or dropped), kept when the whole directory went (a lost disk); brought back by
a restore, after which the index recovers from its snapshots, not by replaying the stream."""

import random
import shutil
import time
from io import StringIO

import pytest
from django.core.management import call_command

from domain.events import EventIn
from store import store as store_module
from streams import logs, services, tiering
from streams.delaying import buckets, maintenance
from streams.logs import stream_log
from streams.models import DelayedBucket, DelayedOp, Stream, TierFile

pytestmark = pytest.mark.django_db

SMALL = {"min_index_count_per_bucket": 20, "max_time_step_per_segment_s": 30, "max_indexes_per_segment": 5}


def make_stream_with_snapshots(api, now_ms: int) -> Stream:
    answer = api.post(
        "/api/v1/streams/",
        {"scope": "shop", "name": "orders", "segment_count": 2, "delayed_index": SMALL},
        format="json",
    )
    assert answer.status_code == 201, answer.content
    stream = Stream.objects.get(name="orders")
    rng = random.Random(3)
    for first in range(0, 140, 7):
        events = [
            EventIn(f"e{i}".encode(), deliver_at_ms=now_ms + rng.randrange(60_000, 600_000))
            for i in range(first, first + 7)
        ]
        services.do_publish(stream, events)
    maintenance.maintain(stream, now_ms)
    assert DelayedBucket.objects.filter(stream=stream).count() >= 3
    return stream


def test_delayed_snapshots_are_copied_once_and_their_copies_follow_the_local_files(tier, api):
    stream = make_stream_with_snapshots(api, int(time.time() * 1000))
    local = tiering.beside_files(stream)
    assert local and all(path.startswith(f"delayed/{stream.storage_key}/") for path in local)

    tiering.do_offload(stream)
    rows = {r.path: r for r in TierFile.objects.filter(stream=stream)}
    assert set(rows) == set(local)
    for path, file in local.items():
        assert tier.get(tiering.beside_key(stream, path), rows[path].crc32c) == file.read_bytes()
    assert tiering.do_offload(stream).objects == 0  # nothing twice
    storage = api.get("/api/v1/streams/shop/orders/").json()["storage"]
    assert storage["tier_bytes"] >= sum(r.size for r in rows.values())

    gone_path, gone_file = next(iter(local.items()))
    gone_file.unlink()  # as a merge of buckets deletes a snapshot
    tiering.do_offload(stream)
    assert gone_path not in set(TierFile.objects.filter(stream=stream).values_list("path", flat=True))
    assert tier.size(tiering.beside_key(stream, gone_path)) is None

    shutil.rmtree(buckets.snapshot_dir(stream))  # the whole directory lost: the copies are kept
    tiering.do_offload(stream)
    assert TierFile.objects.filter(stream=stream).count() == len(local) - 1
    assert tiering.sweep() == 0  # nor does the sweep take them


def test_a_restore_brings_the_snapshots_back_and_the_index_recovers_from_them(tier, api, redis):
    now_ms = int(time.time() * 1000)
    stream = make_stream_with_snapshots(api, now_ms)
    tiering.do_offload(stream, all_sealed=True)
    local = {path: file.read_bytes() for path, file in tiering.beside_files(stream).items()}
    held = stream_log(stream).infos()

    shutil.rmtree(stream_log(stream).root)  # the host's disk is gone: the log and the snapshots
    shutil.rmtree(buckets.snapshot_dir(stream))
    for key in redis.scan_iter(match="cbr:*", count=1000):  # and Redis with it
        redis.delete(key)
    store_module._SEGMENTS.clear()
    store_module._SEALED_ENDS.clear()
    logs._stream_log.cache_clear()
    out = StringIO()
    call_command("restore_from_tier", stdout=out)
    assert f"shop/orders: {len(local)} files beside the log brought back" in out.getvalue()
    assert {path: file.read_bytes() for path, file in tiering.beside_files(stream).items()} == local

    done = maintenance.maintain(Stream.objects.get(pk=stream.pk), now_ms)
    assert done["recovered"]
    recovered = DelayedOp.objects.filter(stream=stream, type="recover").first()
    assert recovered is not None and recovered.state == "succeed"
    assert not DelayedOp.objects.filter(stream=stream, type="rebuild").exists()  # read from the snapshots
    assert set(stream_log(Stream.objects.get(pk=stream.pk)).infos()) == set(held)
