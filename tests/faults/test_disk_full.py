"""The data disk fills up under the real web server (CBR_DATA_DIR on a 1 MiB tmpfs): publishing
is refused with 507 `insufficient_storage` (JSON naming the problem, never a 500), nothing torn
is readable, every 201'd event stays intact; freeing space (a truncation, then a bigger disk)
lets publishing go on at the next offset."""

import pytest
import tiny_disk

from cbr_client import CBRError, Client
from faults.invariants import PublishLedger, check_nothing_before_head_over_api, check_published_intact, stream_named
from streams import logs, services
from streams.models import Scope, Segment, Stream

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

STREAM = "faults/full"

# The server's store must sit on the small filesystem from its start; mounting one needs root
# here (CI runs as root). tests/storage/test_disk_full.py covers the store without root too.
if not tiny_disk.is_root():
    pytest.skip("mounting a tmpfs for the server's data dir needs root (CI runs as root)", allow_module_level=True)


@pytest.fixture
def data_dir(tmp_path, settings):
    """The segment store on a 1 MiB tmpfs, for the server and for this process alike."""
    with tiny_disk.tmpfs(tmp_path / "data", "1m") as disk:
        settings.CBR_DATA_DIR = disk
        yield disk


def publish_until_refused(cbr, ledger, tag, refused_payloads):
    """Batches without routing keys, spread over both segments: a refused one may have left its
    part for the other segment (docs/reliability.md), whole; those payloads are noted."""
    for b in range(10_000):
        payloads = [f"{tag}-{b}-{i}-".encode() + b"z" * 3000 for i in range(1 + b % 5)]
        try:
            positions = cbr.publish(STREAM, [p.decode() for p in payloads])
        except CBRError as refused:
            refused_payloads.update(payloads)
            return refused
        ledger.record(STREAM, positions, payloads)
    raise AssertionError("the disk never filled")


def test_a_full_data_disk_refuses_publishing_with_507_and_corrupts_nothing(small_chunks, data_dir, web_server, token):
    # given a stream on a 1 MiB disk, published to until the disk is full
    services.do_create_stream(scope="faults", name="full", segment_count=2)
    cbr = Client(web_server.url, token=token)
    ledger = PublishLedger()
    refused_payloads: set[bytes] = set()
    refused = publish_until_refused(cbr, ledger, "a", refused_payloads)

    # then the refusal is a 507 that says what is wrong, and stays one
    assert refused.status == 507, refused.body
    assert refused.code == "insufficient_storage" and refused.field == "events"
    assert "disk is full" in refused.body["message"]
    for _ in range(3):
        with pytest.raises(CBRError) as again:
            cbr.publish(STREAM, ["y" * 20_000] * 4)
        assert again.value.status == 507
    refused_payloads.add(b"y" * 20_000)
    accepted = len(ledger.events[STREAM])
    assert accepted > 100

    # nothing torn, nothing lost; reads work on the full disk
    check_published_intact(ledger)
    check_nothing_before_head_over_api(cbr, STREAM)
    check_only_answered_or_refused(cbr, ledger, refused_payloads)

    # when a truncation frees whole chunks, publishing goes on at the next offset
    stream = stream_named(STREAM)
    tails = logs.stream_log(stream).tail_cut()
    cut = {seg: tail // 2 for seg, tail in tails.items()}
    cbr.request("POST", f"streams/{STREAM}/truncate/", {"stream_cut": cut})
    refused_again = publish_until_refused(cbr, ledger, "b", refused_payloads)
    assert refused_again.status == 507
    assert len(ledger.events[STREAM]) > accepted
    check_published_intact(ledger)
    check_nothing_before_head_over_api(cbr, STREAM)

    # and with a bigger disk, too
    tiny_disk.remount(data_dir, "4m")
    positions = cbr.publish(STREAM, [{"payload": "after", "routing_key": "r"}])
    seg = positions[0]["segment"]
    assert positions[0]["offset"] == logs.stream_log(stream).segment(seg).committed_tail().next_offset - 1
    ledger.record(STREAM, positions, [b"after"])
    check_published_intact(ledger)
    check_only_answered_or_refused(cbr, ledger, refused_payloads)


def check_only_answered_or_refused(cbr, ledger, refused_payloads):
    """What a read returns is what was answered 201, plus whole parts of refused batches
    (their part for the segment that had room), nothing else."""
    answered = ledger.events[STREAM]
    events = cbr.request("GET", f"streams/{STREAM}/events/?limit=1000")["events"]
    assert len(events) < 1000
    for e in events:
        payload = e["payload"].encode()
        key = (e["segment"], e["offset"])
        assert answered.get(key) == payload or (key not in answered and payload in refused_payloads), key
    heads = logs.stream_log(stream_named(STREAM)).head_cut()
    assert {k for k in answered if k[1] >= heads[k[0]]} <= {(e["segment"], e["offset"]) for e in events}


def fill(disk) -> None:
    """Take every free byte of the disk with a file (`disk/filler`)."""
    with open(disk / "filler", "wb", buffering=0) as f:
        for size in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno == 28, exc  # ENOSPC


def test_a_stream_created_on_a_full_disk_leaves_nothing_and_the_retry_succeeds_once_space_exists(
    data_dir, web_server, token
):
    # given a full data disk
    cbr = Client(web_server.url, token=token)
    fill(data_dir)
    body = {"scope": "faults", "name": "late", "segment_count": 2}

    # when a stream is created, and created again
    for _ in range(2):
        with pytest.raises(CBRError) as refused:
            cbr.request("POST", "streams/", body)
        # then each is a 507 that says what is wrong, and leaves no stream behind (not a 409)
        assert (refused.value.status, refused.value.code) == (507, "insufficient_storage"), refused.value.body
        assert not Stream.objects.filter(name="late").exists()
        assert "the stream was not created" in refused.value.body["message"]
    with pytest.raises(CBRError) as unknown:
        cbr.request("GET", "streams/faults/late/")
    assert unknown.value.status == 404

    # when space is freed, the same create succeeds and the stream takes events
    (data_dir / "filler").unlink()
    created = cbr.request("POST", "streams/", body)
    assert created["tail_cut"] == {"0": 0, "1": 0}
    assert cbr.publish("faults/late", ["first"])


def test_reading_on_a_full_disk_never_answers_507(data_dir, web_server, token):
    # given a stream with events, and one whose segments were never made (its row committed
    # without them, as a create on a full disk did before), on a full disk
    cbr = Client(web_server.url, token=token)
    services.do_create_stream(scope="faults", name="kept", segment_count=2)
    cbr.publish("faults/kept", ["a", "b", "c"])
    bare = Stream.objects.create(scope=Scope.objects.get(name="faults"), name="bare", segment_count=2)
    Segment.objects.bulk_create(Segment(stream=bare, segment_id=s) for s in bare.segment_ids)
    fill(data_dir)

    # then every read answers
    assert cbr.request("GET", "streams/faults/kept/")["event_count"] == 3
    assert sorted(e["payload"] for e in cbr.request("GET", "streams/faults/kept/events/")["events"]) == ["a", "b", "c"]
    detail = cbr.request("GET", "streams/faults/bare/")
    assert (detail["tail_cut"], detail["event_count"]) == ({"0": 0, "1": 0}, 0)
    assert cbr.request("GET", "streams/faults/bare/events/") == {"events": [], "next_cut": {"0": 0, "1": 0}}
    assert {s["full_name"] for s in cbr.request("GET", "streams/?scope=faults")["results"]} == {
        "faults/kept",
        "faults/bare",
    }
    # publishing needs space: still refused, and accepted once there is some
    with pytest.raises(CBRError) as refused:
        cbr.publish("faults/bare", ["x"])
    assert refused.value.status == 507
    (data_dir / "filler").unlink()
    assert cbr.publish("faults/bare", [{"payload": "x", "routing_key": "r"}])[0]["offset"] == 0
