"""kill -9 of the whole web server (gunicorn, two processes) while producers publish through the
HTTP API, three times: every batch answered 201 is readable afterwards, whole and in order; a
batch whose answer was lost is either all there (in its segment) or not at all; nothing before
the head is readable; the server publishes on after each restart."""

import threading
import time
from collections import defaultdict

import pytest

from cbr_client import CBRError, Client
from faults.invariants import PublishLedger, check_nothing_before_head_over_api, check_published_intact, stream_named
from streams import logs, services

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

STREAM = "faults/pub"


def producer(url, token, tag, routing_key, ledger, attempts, stop):
    """Publishes batches of 1–24 events, each payload naming its batch; records the 201'd ones."""
    batch_no = 0
    while not stop.is_set():
        batch_no += 1
        size = 1 + (batch_no * 7) % 24
        payloads = [f"{tag}|{batch_no}|{i}|{size}|".encode() + b"x" * (batch_no % 300) for i in range(size)]
        attempts[tag].append((batch_no, size))
        events = [{"payload": p.decode(), **({"routing_key": routing_key} if routing_key else {})} for p in payloads]
        try:
            with Client(url, token=token, timeout=5) as cbr:
                answer = cbr.request("POST", f"streams/{STREAM}/events/", {"events": events})
        except (OSError, CBRError):
            time.sleep(0.02)  # down, or dying: this batch's answer is lost
            continue
        ledger.record(STREAM, answer["positions"], payloads)


def test_kill_9_of_the_web_server_during_publish_loses_no_201_and_tears_nothing(small_chunks, web_server, token):
    services.do_create_stream(scope="faults", name="pub", segment_count=3)
    ledger = PublishLedger()
    attempts = defaultdict(list)
    stop = threading.Event()
    threads = [
        threading.Thread(target=producer, args=(web_server.url, token, tag, key, ledger, attempts, stop))
        for tag, key in (("a", "key-a"), ("b", "key-b"), ("c", None))  # c: spread over the segments
    ]
    for t in threads:
        t.start()
    answered = []
    for _ in range(3):
        time.sleep(0.8)
        answered.append(len(ledger.events[STREAM]))
        web_server.kill()  # wherever the producers are: writing, syncing, committing, answering
        time.sleep(0.2)
        web_server.start()
    time.sleep(0.8)
    stop.set()
    for t in threads:
        t.join(30)
    answered.append(len(ledger.events[STREAM]))
    assert answered == sorted(answered) and answered[0] > 0 and answered[-1] > answered[-2]  # it published on

    # every 201'd event is there, whole; nothing before the head
    check_published_intact(ledger)
    cbr = Client(web_server.url, token=token)
    check_nothing_before_head_over_api(cbr, STREAM)

    # in order: a producer with a routing key sees its answered batches at rising offsets, each
    # batch contiguous
    by_tag = defaultdict(list)
    for (seg, offset), payload in sorted(ledger.events[STREAM].items(), key=lambda kv: kv[0]):
        tag, batch_no, i, _ = payload.split(b"|", 3)
        by_tag[tag.decode()].append((int(batch_no), int(i), seg, offset))
    for tag in ("a", "b"):
        got = by_tag[tag]
        assert len({seg for *_, seg, _ in got}) == 1
        assert [(b, i) for b, i, *_ in got] == sorted((b, i) for b, i, *_ in got)  # offsets follow publish order

    # a batch whose answer was lost is all there or not at all, in each segment
    stream = stream_named(STREAM)
    log = logs.stream_log(stream)
    parts = defaultdict(int)
    sizes = {}
    for seg in stream.segment_ids:
        for rec in log.segment(seg).read(0, 1_000_000):
            tag, batch_no, _, size = rec.payload.split(b"|")[:4]
            parts[(tag.decode(), int(batch_no), seg)] += 1
            sizes[(tag.decode(), int(batch_no))] = int(size)
    for tag in ("a", "b"):
        for (t, batch_no, _seg), count in parts.items():
            if t == tag:
                assert count == sizes[(t, batch_no)], (
                    f"batch {tag}/{batch_no} is torn: {count} of {sizes[(t, batch_no)]}"
                )
    lost_answers = sum(1 for tag in attempts for b, _ in attempts[tag]) - len(
        {(p.split(b"|")[0], p.split(b"|")[1]) for p in ledger.events[STREAM].values()}
    )
    assert lost_answers >= 1  # some publishes went unanswered (cut off, or refused while down)
    print(
        f"publish under kill -9: {len(ledger.events[STREAM])} events answered 201, "
        f"{lost_answers} batches unanswered, all intact"
    )

    # and it goes on: one more batch lands after everything else
    after = cbr.publish(STREAM, [{"payload": "after", "routing_key": "key-a"}])
    seg, offset = after[0]["segment"], after[0]["offset"]
    assert offset == log.segment(seg).committed_tail().next_offset - 1
