"""Chunks whose local copy was released to long-term storage (`CBR_TIER_LOCAL_KEEP_S` after their
verified upload) read as before through every read path: plain reads over REST, a reader group's
reads and acks, the event browser's filtered search, the delayed index's replay; a truncation
deletes them in both places; a tier that stops answering fails only the reads that need it,
with a 503 naming it. On a file tier and on a real S3-compatible server."""

import shutil
import time
import urllib.parse
from io import StringIO

import factories
import orjson
import pytest
from django.core.management import call_command
from tier_servers import free_port

from domain.event_filters import EventFilter
from domain.events import EventIn
from store.offload import tier_key
from store.redis_connection import get_redis
from store.segment.directory import TIERED
from store.tier.opening import tier_for
from streams import browsing, services, tiering, wait_stats
from streams.logs import stream_log
from streams.models import Stream, TierObject

pytestmark = pytest.mark.django_db

S = "/api/v1/streams/shop/orders/"
GROUPS = "/api/v1/reader-groups/"


def make_stream(events: int = 60, **body) -> Stream:
    stream = factories.make_stream(segment_count=2, **body)
    for seg in ("0", "1"):
        key = factories.routing_key_for(stream, seg)
        for i in range(events // 2):
            services.do_publish(stream, [EventIn(f"{seg}:{i:03d}:".encode() + b"x" * 200, routing_key=key)])
    return stream


def offload_and_release(stream: Stream, settings) -> tiering.Offloaded:
    """Copy every sealed file now and release the local copies, as beat does once
    CBR_TIER_LOCAL_KEEP_S has passed since the uploads (an hour past it: the copies themselves
    may take over a second on a busy machine, and a copy younger than that is kept)."""
    done = tiering.do_offload(stream, now=time.time() + settings.CBR_TIER_LOCAL_KEEP_S + 3600, all_sealed=True)
    assert done.released >= 8 and done.freed > 0
    return done


def released_bases(stream: Stream) -> dict[str, list[int]]:
    log = stream_log(stream)
    return {
        seg: [b for b in log.segment(seg).chunk_bases() if log.segment(seg).chunk_path(b, TIERED).exists()]
        for seg in ("0", "1")
    }


def read_all(api, cut=None) -> list[dict]:
    events: list[dict] = []
    while True:
        query = "limit=25" + ("" if cut is None else "&from=" + urllib.parse.quote(orjson.dumps(cut).decode()))
        page = api.get(f"{S}events/?{query}").json()
        if not page["events"]:
            return events
        events += page["events"]
        cut = page["next_cut"]


def test_local_copies_are_released_only_after_CBR_TIER_LOCAL_KEEP_S(tier, settings):
    stream = make_stream()
    assert tiering.do_offload(stream).released == 0  # uploaded now: kept for CBR_TIER_LOCAL_KEEP_S
    assert released_bases(stream) == {"0": [], "1": []}
    later = tiering.do_offload(stream, now=time.time() + settings.CBR_TIER_LOCAL_KEEP_S + 1)
    assert later.objects == 0 and later.released == TierObject.objects.filter(kind="chunk").count()


def test_every_read_path_reads_released_chunks_as_before(tier, api, settings):
    stream = make_stream()
    before = read_all(api)
    assert len(before) == 60
    offload_and_release(stream, settings)
    released = released_bases(stream)
    assert all(len(b) >= 4 for b in released.values())

    storage = api.get(S).json()["storage"]  # only each segment's active chunk is still here
    assert storage["chunks_local"] == 2 and storage["chunks_tier"] == sum(len(b) for b in released.values())

    assert read_all(api) == before  # plain reads, page by page from the head
    middle = {"0": released["0"][2] + 1, "1": released["1"][1]}
    assert read_all(api, middle) == [e for e in before if e["offset"] >= middle[e["segment"]]]

    # a reader group reads and acknowledges everything, in each segment's order
    factories.create_group_over_api(api, "billing", retention_type="NONE", max_ack_pending=1000)
    got = api.post(GROUPS + "shop/billing/read/", {"max_events": 1000}, format="json").json()["deliveries"]
    assert sorted((d["segment"], d["offset"], d["payload"]) for d in got) == sorted(
        (e["segment"], e["offset"], e["payload"]) for e in before
    )
    acked = api.post(GROUPS + "shop/billing/ack/", {"delivery_ids": [d["delivery_id"] for d in got]}, format="json")
    assert acked.status_code == 200 and acked.json()["acked"] == 60

    # the event browser's search: a filter that keeps one event in a released chunk
    wanted = next(e for e in before if e["segment"] == "0" and e["offset"] == released["0"][1])
    page = browsing.browse(stream, {"0": 0, "1": 0}, 10, where=EventFilter(contains=wanted["payload"][:6].encode()))
    assert [(e["segment"], e["offset"]) for e in page.events] == [("0", wanted["offset"])]
    found = api.get(f"{S}events/?contains={wanted['payload'][:6]}").json()["events"]
    assert [e["payload"] for e in found] == [wanted["payload"]]


def test_a_truncation_deletes_released_chunks_in_both_places(tier, api, settings):
    stream = make_stream()
    before = read_all(api)
    offload_and_release(stream, settings)
    released = released_bases(stream)
    head = {"0": released["0"][3] + 1, "1": released["1"][2]}
    rows = TierObject.objects.filter(stream=stream).count()
    assert api.post(S + "truncate/", {"stream_cut": head}, format="json").status_code == 200

    after = released_bases(stream)
    assert after["0"] == released["0"][3:] and after["1"] == released["1"][2:]  # the stubs before the head went
    record = api.get(S + "truncations/").json()["results"][0]
    # five chunks went: only their stubs were local, their bytes were in the tier
    assert (record["chunks_deleted"], record["bytes_deleted"]) == (5, 0)
    assert record["tier_objects_deleted"] == rows - TierObject.objects.filter(stream=stream).count() >= 5
    assert record["tier_bytes_deleted"] > 5 * 1000
    for row in TierObject.objects.filter(stream=stream):
        assert row.end > head[row.segment_id]
    assert read_all(api) == [e for e in before if e["offset"] >= head[e["segment"]]]


def test_the_delayed_index_is_replayed_from_released_chunks(tier, api, settings):
    stream = make_stream(events=0)
    due_ms = int((time.time() + 3600) * 1000)
    for first in range(0, 70, 7):
        services.do_publish(stream, [EventIn(b"d" * 150, deliver_at_ms=due_ms + i) for i in range(first, first + 7)])
    offload_and_release(stream, settings)
    out = StringIO()
    call_command("delayed_index", "--stream", "shop/orders", "--replay", stdout=out)
    assert "70 indexes re-read" in out.getvalue()


def test_a_tier_that_stops_answering_fails_only_the_reads_that_need_it(s3_server, settings, monkeypatch, api):
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    settings.CBR_TIER_URL = f"s3://{s3_server.new_bucket()}/cbr"
    settings.CBR_TIER_CACHE_BYTES = 0  # nothing cached: every read of a released chunk asks the tier
    stream = make_stream()
    before = read_all(api)
    offload_and_release(stream, settings)

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nothing answers there
    tier_for.cache_clear()
    answer = api.get(f"{S}events/?limit=10")
    assert answer.status_code == 503 and answer.json()["code"] == "tier_unavailable"
    assert answer["Retry-After"] == "1"
    tails = {s: i.head for s, i in stream_log(stream).infos().items()}
    active = {s: stream_log(stream).segment(s).committed_tail().active_base for s in tails}
    local = api.get(f"{S}events/?limit=100&from=" + urllib.parse.quote(orjson.dumps(active).decode()))
    assert local.status_code == 200 and local.json()["events"]  # what is still local reads on
    published = factories.publish_over_api(api, [{"payload": "still taken"}])
    assert published["positions"]

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.url)  # back
    tier_for.cache_clear()
    assert read_all(api)[: len(before)] == before


def metric(client, line_start: str) -> float:
    text = client.get("/metrics").content.decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start))


def test_metrics_count_reads_of_released_chunks_copies_and_errors(tier, api, client, settings):
    stream = make_stream()
    names = (
        "cbr_tier_cache_hits_total",
        'cbr_tier_fetches_total{how="whole"}',
        'cbr_tier_fetches_total{how="ranged"}',
        "cbr_tier_offload_seconds_count",
    )
    wait_stats.flush(get_redis(), None)  # what earlier tests counted in this process
    before = {name: metric(client, name) for name in names}
    done = offload_and_release(stream, settings)
    released = released_bases(stream)
    read_all(api)  # each released chunk fetched whole once, then read from the cache
    shutil.rmtree(settings.CBR_DATA_DIR / "tier-cache")
    stream_log(stream).segment("0").read(released["0"][2] - 1, 1)  # one record of a small chunk: fetched whole
    wait_stats.flush(get_redis(), None)  # what a web process's listener does every second
    grew = {name: metric(client, name) - before[name] for name in names}
    assert grew['cbr_tier_fetches_total{how="whole"}'] == sum(len(b) for b in released.values()) + 1
    assert grew["cbr_tier_cache_hits_total"] > 0
    assert grew['cbr_tier_fetches_total{how="ranged"}'] == 0  # 1 KiB chunks: never by range (tests/storage)
    assert grew["cbr_tier_offload_seconds_count"] == done.objects


def test_a_corrupted_object_is_refused_not_read_and_not_cached(tier, api, settings):
    stream = make_stream()
    before = read_all(api)
    offload_and_release(stream, settings)
    first = released_bases(stream)["0"][0]
    key = tier_key(stream.storage_key, "0", first, "chunk")
    data = bytearray(tier.get(key))
    data[len(data) // 2] ^= 0xFF  # a bit gone bad in the store, behind CBR's back
    if tier.kind == "file":
        (tier.root / key).write_bytes(bytes(data))
    else:
        tier.client.put_object(Bucket=tier.bucket, Key=tier.prefix + key, Body=bytes(data))

    answer = api.get(f"{S}events/?limit=10")
    assert answer.status_code == 503 and answer.json()["code"] == "tier_unavailable"
    assert "checksum" in answer.json()["message"]
    assert not list((settings.CBR_DATA_DIR / "tier-cache").rglob("*.chunk"))
    after_it = {"0": released_bases(stream)["0"][1], "1": 0}  # what does not need that chunk reads on
    assert read_all(api, after_it) == [e for e in before if e["offset"] >= after_it[e["segment"]]]
