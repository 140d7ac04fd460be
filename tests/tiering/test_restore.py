"""`manage.py restore_from_tier` after a host lost its data directory: every sealed chunk the tier
holds comes back and reads as before, the head stays where retention left it, appends go on past
every offset a reader group was handed (no offset given twice), the reader groups' floors hold,
and the report names what was lost (the chunks never sealed or never copied). On a file tier and
on a real S3-compatible server."""

import shutil
import time
from io import StringIO

import factories
import pytest
from django.core.management import CommandError, call_command

from domain.events import EventIn
from store import store as store_module
from streams import logs, services, tiering
from streams.logs import stream_log
from streams.models import Stream, TierObject

pytestmark = pytest.mark.django_db

S = "/api/v1/streams/shop/orders/"
GROUPS = "/api/v1/reader-groups/"


def make_stream(events_per_segment: int = 30) -> Stream:
    stream = factories.make_stream(segment_count=2)
    for seg in ("0", "1"):
        key = factories.routing_key_for(stream, seg)
        for i in range(events_per_segment):
            services.do_publish(stream, [EventIn(f"{seg}:{i:03d}:".encode() + b"x" * 200, routing_key=key)])
    return stream


def read_all(api) -> list[dict]:
    events, query = [], "limit=1000"
    page = api.get(f"{S}events/?{query}").json()
    events += page["events"]
    return events


def lose_the_data_directory(stream: Stream) -> None:
    """The host's disk is gone; the restore runs in a fresh process (no segment open)."""
    shutil.rmtree(stream_log(stream).root)
    store_module._SEGMENTS.clear()
    store_module._SEALED_ENDS.clear()
    logs._stream_log.cache_clear()


def restore(*args) -> str:
    out = StringIO()
    call_command("restore_from_tier", *args, stdout=out)
    return out.getvalue()


def test_a_lost_data_directory_is_restored_from_the_tier_with_what_was_lost_reported(tier, api, settings):
    stream = make_stream()
    before = read_all(api)
    assert len(before) == 60
    factories.create_group_over_api(api, "billing", retention_type="NONE", max_ack_pending=1000)
    got = api.post(GROUPS + "shop/billing/read/", {"max_events": 1000}, format="json").json()["deliveries"]
    first_half = [d["delivery_id"] for d in got if d["offset"] < 10]
    api.post(GROUPS + "shop/billing/ack/", {"delivery_ids": first_half}, format="json")
    head = {"0": 5, "1": 7}
    assert api.post(S + "truncate/", {"stream_cut": head}, format="json").status_code == 200
    tiering.do_offload(stream, all_sealed=True)
    ends = {r.segment_id: r.end for r in TierObject.objects.filter(stream=stream, kind="chunk").order_by("end")}
    tails = {s: i.tail for s, i in stream_log(stream).infos().items()}
    assert all(ends[s] < tails[s] for s in ("0", "1"))  # each segment's active chunk was never copied

    lose_the_data_directory(stream)
    report = restore()

    for seg in ("0", "1"):  # the active chunk's events are what was lost, and said so
        assert (
            f"segment {seg}: " in report
            and f"lost {tails[seg] - ends[seg]} events: [{ends[seg]}, {tails[seg]})" in report
        )
    assert f"lost at least {sum(tails[s] - ends[s] for s in tails)} events" in report
    kept = [e for e in before if head[e["segment"]] <= e["offset"] < ends[e["segment"]]]
    assert read_all(api) == kept  # every copied event back, from the head retention left
    storage = api.get(S).json()["storage"]
    assert storage["chunks_local"] == 2 and storage["chunks_tier"] == TierObject.objects.filter(kind="chunk").count()

    # appends go on past every offset the group was handed: none is given to two events
    key = factories.routing_key_for(stream, "0")
    position = services.do_publish(stream, [EventIn(b"after the restore", routing_key=key)])[0]
    assert position.offset >= tails["0"]
    again = api.post(GROUPS + "shop/billing/read/", {"max_events": 1000}, format="json").json()["deliveries"]
    assert [(d["segment"], d["offset"], d["payload"]) for d in again] == [("0", position.offset, "after the restore")]


def test_segments_with_chunks_on_disk_are_left_and_a_restore_needs_a_tier(tier, api, settings):
    stream = make_stream(10)
    tiering.do_offload(stream, all_sealed=True)
    before = read_all(api)
    assert "left, it has chunks on disk" in restore("--stream", "shop/orders")
    assert read_all(api) == before
    with pytest.raises(CommandError, match="no stream shop/nope"):
        restore("--stream", "shop/nope")
    settings.CBR_TIER_URL = ""
    with pytest.raises(CommandError, match="CBR_TIER_URL"):
        restore()


def test_a_restore_reads_chunks_released_before_the_loss(tier, api, settings):
    stream = make_stream()
    before = read_all(api)
    tiering.do_offload(stream, now=time.time() + settings.CBR_TIER_LOCAL_KEEP_S + 3600, all_sealed=True)
    ends = {r.segment_id: r.end for r in TierObject.objects.filter(stream=stream, kind="chunk").order_by("end")}
    lose_the_data_directory(stream)
    restore()
    assert read_all(api) == [e for e in before if e["offset"] < ends[e["segment"]]]


def test_a_segment_a_scale_sealed_is_restored_sealed_and_read_before_its_successors(tier, api):
    factories.create_stream_over_api(api)
    key = factories.key_in(0.2, 0.3)
    for i in range(12):
        factories.publish_over_api(api, [{"routing_key": key, "payload": f"before {i:02d} " + "x" * 200}])
    scaled = factories.scale_over_api(api, ["0"], [[0.0, 0.5], [0.5, 1.0]])
    for i in range(3):
        factories.publish_over_api(api, [{"routing_key": key, "payload": f"after {i:02d}"}])
    stream = Stream.objects.get(name="orders")
    tiering.do_offload(stream, all_sealed=True)
    sealed_end = stream_log(stream).segment("0").sealed_end()
    assert TierObject.objects.filter(segment_id="0", kind="chunk").order_by("-end").first().end == sealed_end

    lose_the_data_directory(stream)
    report = restore()
    assert "segment 0: " in report and f"appends go on at {sealed_end}; lost 0 events" in report
    stream = Stream.objects.get(pk=stream.pk)
    assert stream_log(stream).segment("0").sealed_end() == sealed_end  # sealed again, at its end
    payloads = [e["payload"] for e in read_all(api)]
    # the sealed segment's events all came back, before its successors' (whose active chunks were lost)
    assert payloads == [f"before {i:02d} " + "x" * 200 for i in range(12)]
    new = factories.publish_over_api(api, [{"routing_key": key, "payload": "later"}])["positions"][0]
    assert new["segment"] != "0" and new["segment"] in str(scaled)  # to a successor, never to the sealed one
