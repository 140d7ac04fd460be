"""Sealed files copied to long-term storage (streams.tiering): on a file tier and on a real
S3-compatible server the tests start; each copy verified and recorded, copied once, after
CBR_TIER_AFTER_S; `POST …/offload/`; the stream's detail; the copies deleted with what retention
truncates and with the stream; a tier that does not answer leaves its deletions for later."""

import time
from unittest import mock

import factories
import pytest
from django.urls import reverse
from tier_servers import free_port

from domain.events import EventIn
from store import locks
from store.offload import sealed_files, tier_key
from store.tier.opening import tier_for
from streams import services, tasks, tiering
from streams.logs import stream_log
from streams.models import Stream, TierObject
from streams.tiering import offload as tier_offload

pytestmark = pytest.mark.django_db

S = "/api/v1/streams/shop/orders/"


def make_stream_with_sealed_chunks(events: int = 40) -> Stream:
    stream = factories.make_stream(segment_count=2)
    for seg in ("0", "1"):
        key = factories.routing_key_for(stream, seg)
        for i in range(events // 2):
            services.do_publish(stream, [EventIn(f"{seg}:{i}:".encode() + b"x" * 200, routing_key=key)])
    return stream


def local_files(stream):
    return sealed_files(stream_log(stream))


def test_sealed_files_are_copied_once_verified_and_recorded(tier, api):
    stream = make_stream_with_sealed_chunks()
    files = local_files(stream)
    assert len([f for f in files if f.kind == "chunk"]) >= 6  # both segments rolled several chunks

    done = tiering.do_offload(stream)
    rows = list(TierObject.objects.filter(stream=stream))
    assert done.objects == len(rows) == len(files)
    for f in files:  # the same bytes, under the key the row names, with the checksum it records
        row = next(r for r in rows if (r.segment_id, r.base, r.kind) == (f.segment, f.base, f.kind))
        assert tier.get(tier_key(stream.storage_key, f.segment, f.base, f.kind), row.crc32c) == f.path.read_bytes()
        assert row.end == f.end and row.size == f.path.stat().st_size
    assert tiering.do_offload(stream).objects == 0  # nothing twice

    storage = api.get(S).json()["storage"]
    chunks = [r for r in rows if r.kind == "chunk"]
    assert storage["tier_bytes"] == sum(r.size for r in rows) and storage["chunks_tier"] == len(chunks)
    assert storage["chunks_local"] == len(chunks) + 2  # the copies stay, beside each segment's active chunk
    assert storage["local_bytes"] >= sum(r.size for r in chunks)


def test_a_chunk_waits_CBR_TIER_AFTER_S_after_it_was_sealed(tier, settings):
    settings.CBR_TIER_AFTER_S = 3600
    stream = make_stream_with_sealed_chunks()
    assert tiering.do_offload(stream).objects == 0
    assert tiering.do_offload(stream, now=time.time() + 3601).objects == len(local_files(stream))


def test_one_process_at_a_time_copies_a_streams_files(tier):
    stream = make_stream_with_sealed_chunks()
    with tiering.offload_lock(stream) as got:  # another process's run, under way
        assert got and tiering.do_offload(stream).objects == 0 and not TierObject.objects.exists()
    assert tiering.do_offload(stream).objects == len(local_files(stream))


def test_post_offload_queues_the_copy_of_everything_sealed(tier, api, user_api, settings):
    settings.CBR_TIER_AFTER_S = 3600  # young: only the request sends them now
    stream = make_stream_with_sealed_chunks()
    files = local_files(stream)
    assert user_api.post(S + "offload/").status_code == 403
    refused = api.post(S + "offload/", {"now": True}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "now"

    answer = api.post(S + "offload/")
    assert answer.status_code == 202
    assert answer.json() == {"files": len(files), "bytes": sum(f.path.stat().st_size for f in files)}
    assert tasks.offload_stream(stream.pk) == len(files)  # what the worker runs
    assert api.post(S + "offload/").json() == {"files": 0, "bytes": 0}


def test_without_a_tier_nothing_is_copied_and_offload_is_refused(api, settings):
    settings.CBR_TIER_URL = ""
    stream = make_stream_with_sealed_chunks()
    assert tiering.do_offload(stream).objects == 0 and not TierObject.objects.exists()
    answer = api.post(S + "offload/")
    assert answer.status_code == 409 and answer.json()["code"] == "no_tier"
    assert api.get(S).json()["storage"]["tier_bytes"] == 0


def test_a_truncation_deletes_the_copies_of_the_chunks_it_passed(tier, api):
    stream = make_stream_with_sealed_chunks()
    tiering.do_offload(stream)
    sizes = {(r.segment_id, r.base, r.kind): r.size for r in TierObject.objects.filter(stream=stream)}
    before = set(sizes)
    head = {"0": 12, "1": 8}
    assert api.post(S + "truncate/", {"stream_cut": head}, format="json").status_code == 200

    kept = list(TierObject.objects.filter(stream=stream))
    assert kept and all(r.end > head[r.segment_id] for r in kept)  # every copy left still holds events
    gone = before - {(r.segment_id, r.base, r.kind) for r in kept}
    record = api.get(S + "truncations/").json()["results"][0]  # the truncation says what went there
    assert record["tier_objects_deleted"] == len(gone)
    assert record["tier_bytes_deleted"] == sum(sizes[k] for k in gone)
    assert {segment for segment, _, _ in gone} == {"0", "1"}  # chunks wholly before the head, in both
    for segment, base, kind in gone:
        assert tier.size(tier_key(stream.storage_key, segment, base, kind)) is None
    for r in kept:
        assert tier.size(tier_key(stream.storage_key, r.segment_id, r.base, r.kind)) == r.size


def test_an_unreachable_tier_leaves_its_deletions_for_the_next_cycle(s3_server, settings, monkeypatch, api):
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    settings.CBR_TIER_URL = f"s3://{s3_server.new_bucket()}/cbr"
    stream = make_stream_with_sealed_chunks()
    tiering.do_offload(stream)
    before = TierObject.objects.filter(stream=stream).count()

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nothing answers there
    tier_for.cache_clear()
    assert api.post(S + "truncate/", {"stream_cut": {"0": 12, "1": 3}}, format="json").status_code == 200
    assert TierObject.objects.filter(stream=stream).count() == before  # nothing forgotten

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.url)  # back
    tier_for.cache_clear()
    assert tiering.delete_passed([Stream.objects.get(pk=stream.pk)])[stream.pk][0] > 0  # the next cycle's pass
    assert TierObject.objects.filter(stream=stream).count() < before


def test_deleting_a_stream_deletes_its_objects(tier, api, django_capture_on_commit_callbacks):
    stream = make_stream_with_sealed_chunks()
    other = factories.make_stream("other", segment_count=1)
    for _ in range(12):
        services.do_publish(other, [EventIn(b"y" * 300)])
    tiering.do_offload(stream)
    tiering.do_offload(other)
    assert list(tier.list_keys(f"{stream.storage_key}/"))
    with django_capture_on_commit_callbacks(execute=True):
        assert api.delete(S).status_code == 204
    assert list(tier.list_keys(f"{stream.storage_key}/")) == [] and list(tier.list_keys(f"{other.storage_key}/"))


def test_readiness_and_metrics_say_whether_the_tier_answers(s3_server, settings, monkeypatch, client):
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    settings.CBR_TIER_URL = f"s3://{s3_server.new_bucket()}/cbr"
    stream = make_stream_with_sealed_chunks()
    tiering.do_offload(stream)
    stored = sum(r.size for r in TierObject.objects.filter(stream=stream))
    ready = client.get("/readyz").json()
    assert ready["tier"] == {"ok": True, "kind": "s3", "error": None} and ready["degraded"] == []
    metrics = client.get("/metrics").content.decode()
    assert 'cbr_component_up{component="tier"} 1.0' in metrics
    assert f'cbr_tier_bytes{{stream="shop/orders"}} {float(stored)}' in metrics

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nothing answers there
    tier_for.cache_clear()
    ready = client.get("/readyz").json()
    assert ready["tier"]["ok"] is False and ready["tier"]["error"] and ready["degraded"] == ["tier"]
    assert "tier" not in ready["down"]
    assert 'cbr_component_up{component="tier"} 0.0' in client.get("/metrics").content.decode()


def test_the_sweep_deletes_objects_nothing_needs_and_keeps_the_rest(tier, api):
    stream = make_stream_with_sealed_chunks()
    files = local_files(stream)
    # uploads whose rows never committed: every sealed file of the stream, and a deleted stream's
    for f in files:
        tier.put(tier_key(stream.storage_key, f.segment, f.base, f.kind), f.path.read_bytes())
    tier.put("0123456789abcdef0123456789abcdef/0/00000000000000000000.chunk", b"of a stream gone")
    tier.put(f"{stream.storage_key}/notes.txt", b"not a file the store names")
    assert api.post(S + "truncate/", {"stream_cut": {"0": 12, "1": 8}}, format="json").status_code == 200
    passed = [f for f in files if not f.path.exists()]
    assert passed  # chunks wholly before the head went here

    assert tiering.sweep() == len(passed) + 1
    left = set(tier.list_keys())
    assert left == {tier_key(stream.storage_key, f.segment, f.base, f.kind) for f in files if f.path.exists()} | {
        f"{stream.storage_key}/notes.txt"
    }
    assert tiering.do_offload(stream).objects == len(left) - 1  # the ones still held: recorded now
    assert tiering.sweep() == 0


def test_the_stream_page_says_what_is_in_long_term_storage(tier, admin_client, settings):
    stream = make_stream_with_sealed_chunks()
    tiering.do_offload(stream)
    chunks = TierObject.objects.filter(stream=stream, kind="chunk").count()
    url = reverse("console:stream", kwargs={"scope": "shop", "name": "orders"})
    page = admin_client.get(url).content.decode()
    assert "long-term storage: " in page and f"in {chunks} chunks" in page
    settings.CBR_TIER_URL = ""  # a deployment without one: nothing said
    assert "long-term storage" not in admin_client.get(url).content.decode()


def test_beat_passes_over_streams_with_nothing_new_and_keeps_the_backlog(tier, settings, client):
    settings.CBR_TIER_AFTER_S = 3600
    settings.CBR_TIER_LOCAL_KEEP_S = 7200
    stream = make_stream_with_sealed_chunks()
    now = time.time()
    assert tiering.offload_due(now).objects == 0  # sealed just now: they wait CBR_TIER_AFTER_S
    state = tiering.offload_state(now + 5)
    waiting = sum(f.path.stat().st_size for f in local_files(stream))
    assert state.streams_waiting == 1 and state.waiting_bytes == waiting and 5 <= state.lag_s < 60
    metrics = client.get("/metrics").content.decode()
    assert f"cbr_tier_offload_waiting_bytes {float(waiting)}" in metrics
    with mock.patch.object(tier_offload, "do_offload", side_effect=AssertionError("nothing changed")):
        tiering.offload_due(now + 60)  # passed over: what waits is still told
    assert tiering.offload_state(now + 60).waiting_bytes == waiting
    with locks.lease(tiering.ROUND_LOCK, 60) as got:  # a round still running elsewhere
        assert got and tiering.offload_due(now + 3601) == tiering.Offloaded()

    copied = tiering.offload_due(now + 3601)
    assert copied.objects == len(local_files(stream)) and copied.released == 0
    assert tiering.offload_state(now + 3601).lag_s is None
    with mock.patch.object(tier_offload, "do_offload", side_effect=AssertionError("nothing changed")):
        tiering.offload_due(now + 3700)  # no chunk sealed, nothing due: passed over
    chunks = len([f for f in local_files(stream) if f.kind == "chunk"])
    assert tiering.offload_due(now + 7300).released == chunks  # CBR_TIER_LOCAL_KEEP_S came: looked at again
    for seg in ("0", "1"):  # a new chunk sealed: the stream is looked at again
        key = factories.routing_key_for(stream, seg)
        for _ in range(8):
            services.do_publish(stream, [EventIn(b"later" + b"y" * 200, routing_key=key)])
    assert tiering.offload_due(now + 7400).objects > 0
