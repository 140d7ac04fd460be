"""A compaction run over chunks whose local copies were released to long-term storage: its
Spark tasks read each chunk's copy from the tier (the offloaded columnar copy, or the chunk made
into one), checked against its recorded checksum, stage it for the job, and the staging goes
when the run ends; the view is the one the local chunks would have given. On a file tier."""

import shutil
import time
from datetime import UTC, datetime, timedelta
from io import StringIO

import factories
import pytest
from django.core.management import call_command

from compaction.models import CompactedView, CompactionRun
from compaction.runs import execute, staging_dir, view_dir, warm_up
from store import store as store_module
from store.segment.directory import TIERED
from store.tier.base import TierError
from streams import logs, tiering
from streams.logs import stream_log
from streams.models import TierFile, TierObject

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def tier(settings, tmp_path):
    """A file tier: the test run's shared Spark session started its Python workers before any
    S3 server's credentials were in the environment (a deployment gives its executors the AWS_*
    variables: docs/cluster.md); the S3 reads themselves are tested in test_read_through.py."""
    settings.CBR_TIER_URL = f"file://{tmp_path}/tier"
    return tiering.tier()


S = "/api/v1/streams/shop/profiles/"


def test_a_compaction_reads_released_chunks_from_the_tier(tier, api, spark, settings):
    stream = factories.create_stream_over_api(api, "profiles", cleanup_policy="compact", delete_retention_s=100)
    latest = {}
    for i in range(60):  # ~20 chunks of 1 KiB; each key written several times
        key, value = f"k{i % 7}", f"v{i:03d}-" + "x" * 180
        factories.publish_over_api(api, [{"key": key, "payload": value}], stream="shop/profiles")
        latest[key] = value
    done = tiering.do_offload(stream, now=time.time() + settings.CBR_TIER_LOCAL_KEEP_S + 3600, all_sealed=True)
    segment = stream_log(stream).segment("0")
    released = [b for b in segment.chunk_bases() if segment.chunk_path(b, TIERED).exists()]
    assert done.released == len(released) >= 10
    assert not any(segment.chunk_path(b).exists() or segment.chunk_path(b, "parquet").exists() for b in released)

    run = execute(
        CompactionRun.objects.create(stream=stream, trigger="command"), now=datetime.now(UTC) + timedelta(seconds=1)
    )
    assert run.state == "succeeded" and run.chunks == len(released)  # the active chunk stays on the live log
    assert not staging_dir(stream).exists()
    view = api.get(S + "compacted/", {"limit": 100}).json()
    active_keys = {
        e["key"]
        for e in api.get(S + "events/", {"limit": 100}).json()["events"]
        if e["offset"] >= segment.committed_tail().active_base
    }
    for event in view["events"]:  # every key's latest value among the compacted (sealed) events
        if event["key"] not in active_keys:
            assert event["payload"] == latest[event["key"]]
    assert {e["key"] for e in view["events"]} | active_keys == set(latest)
    assert TierObject.objects.filter(stream=stream, kind="chunk").count() == len(released)


def test_a_compacted_view_is_copied_and_a_restore_brings_it_back(tier, api, spark, settings):
    stream = factories.create_stream_over_api(api, "profiles", cleanup_policy="compact", delete_retention_s=100)
    for i in range(40):
        factories.publish_over_api(
            api, [{"key": f"k{i % 5}", "payload": f"v{i:03d}-" + "x" * 180}], stream="shop/profiles"
        )
    run = execute(
        CompactionRun.objects.create(stream=stream, trigger="command"), now=datetime.now(UTC) + timedelta(seconds=1)
    )
    assert run.state == "succeeded"
    view = api.get(S + "compacted/", {"limit": 100}).json()
    assert view["events"]
    tiering.do_offload(stream, all_sealed=True)
    copied = set(TierFile.objects.filter(stream=stream).values_list("path", flat=True))
    assert any(p.startswith(f"compacted/{stream.storage_key}/gen-1/") and p.endswith(".parquet") for p in copied)

    shutil.rmtree(stream_log(stream).root)  # the host's disk is gone
    shutil.rmtree(view_dir(stream))
    store_module._SEGMENTS.clear()
    store_module._SEALED_ENDS.clear()
    logs._stream_log.cache_clear()
    call_command("restore_from_tier", stdout=StringIO())
    assert api.get(S + "compacted/", {"limit": 100}).json() == view


def _view(api, name):
    page = api.get(f"/api/v1/streams/shop/{name}/compacted/", {"limit": 100}).json()
    return [(e["key"], e["payload"], e["tombstone"], e["segment"], e["offset"]) for e in page["events"]]


def test_without_a_shared_store_a_compaction_reads_and_writes_through_the_tier(tier, api, spark, settings):
    """`CBR_SPARK_SHARED_STORE=false`: the run copies the stream's sealed chunks to the tier, its
    executors read the chunks' copies (made there when missing, then recorded) and the previous
    generation from the tier and write the new one's parts there; the parts are brought into the
    data directory and the staging goes. Two runs (the second over the first's generation, some
    chunks released meanwhile) give the view and the counts a run over the shared store gives."""
    streams = {
        name: factories.create_stream_over_api(api, name, cleanup_policy="compact", delete_retention_s=100)
        for name in ("here", "there")
    }
    counts = ("events_in", "events_out", "keys", "tombstones_dropped", "generation", "bytes_before", "bytes_after")
    for round_ in range(2):
        for i in range(40):
            key, value = f"k{(i + round_) % 6}", ("" if i % 11 == 5 else f"r{round_}-v{i:03d}-" + "x" * 150)
            for name in streams:
                factories.publish_over_api(api, [{"key": key, "payload": value}], stream=f"shop/{name}")
        at = datetime.now(UTC) + timedelta(seconds=1)
        settings.CBR_SPARK_SHARED_STORE = True
        here = execute(CompactionRun.objects.create(stream=streams["here"], trigger="command"), now=at)
        settings.CBR_SPARK_SHARED_STORE = False
        if round_ == 1:  # some of the second round's chunks released: their copies only in the tier
            tiering.do_offload(
                streams["there"], now=time.time() + settings.CBR_TIER_LOCAL_KEEP_S + 3600, all_sealed=True
            )
        there = execute(CompactionRun.objects.create(stream=streams["there"], trigger="command"), now=at)
        assert there.state == "succeeded" and there.chunks == here.chunks >= 5
        assert [getattr(there, f) for f in counts] == [getattr(here, f) for f in counts]
        assert _view(api, "there") == _view(api, "here") and _view(api, "here")
    stream = streams["there"]
    sealed = TierObject.objects.filter(stream=stream, kind="chunk").count()
    assert TierObject.objects.filter(stream=stream, kind="parquet").count() == sealed  # copies made there, recorded
    assert not list(tier.list_keys(f"{stream.storage_key}/compaction-staging/"))
    parts = list((view_dir(stream) / "gen-2").iterdir())  # brought here: the view is served from here
    assert parts and all(p.name.startswith("part-") and p.suffix == ".parquet" for p in parts)


def test_without_a_shared_store_the_warm_up_goes_through_the_tier_and_leaves_nothing_there(tier, spark, settings):
    settings.CBR_SPARK_SHARED_STORE = False
    stats = warm_up(events=70)
    assert [(s.rows, s.marked) for s in stats] == [(7, 0), (7, 0), (7, 0)]  # as over the shared store
    assert list(tier.list_keys()) == []


def test_without_a_shared_store_or_a_tier_a_compaction_fails_at_once_naming_the_setting(api, settings):
    settings.CBR_SPARK_SHARED_STORE = False
    stream = factories.create_stream_over_api(api, "profiles", cleanup_policy="compact", delete_retention_s=100)
    for i in range(20):
        factories.publish_over_api(api, [{"key": f"k{i % 3}", "payload": "x" * 200}], stream="shop/profiles")
    run = CompactionRun.objects.create(stream=stream, trigger="command")
    with pytest.raises(TierError, match="CBR_TIER_URL"):
        execute(run, now=datetime.now(UTC) + timedelta(seconds=1))
    run.refresh_from_db()
    assert run.state == "failed" and "CBR_TIER_URL" in run.error
    assert not CompactedView.objects.filter(stream=stream).exists()
