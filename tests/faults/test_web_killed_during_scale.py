"""kill -9 of the whole web server (gunicorn, two processes) while an operator scales a stream over
and over (split, merge) and producers publish to it with routing keys: after each kill the stream
is in one epoch, whole (its layout, its segments' rows and its scaling history agree), every 201'd
event is readable once, and a plain read from the head gives each routing key's events in the
order they were answered."""

import json
import threading
import time
import urllib.parse
from collections import defaultdict

import pytest

from cbr_client import CBRError, Client
from faults.invariants import PublishLedger, check_published_intact, stream_named
from streams import services
from streams.models import Scaling, Segment

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

STREAM = "faults/scaled"
KEYS = ("key-a", "key-b", "key-c", "key-d")


def producer(url, token, key, ledger, stop):
    """Publishes batches of 1–8 events with one routing key, each payload naming its batch."""
    batch_no = 0
    while not stop.is_set():
        batch_no += 1
        payloads = [f"{key}|{batch_no}|{i}".encode() for i in range(1 + batch_no % 8)]
        try:
            with Client(url, token=token, timeout=5) as cbr:
                answer = cbr.request(
                    "POST",
                    f"streams/{STREAM}/events/",
                    {"events": [{"payload": p.decode(), "routing_key": key} for p in payloads]},
                )
        except (OSError, CBRError):
            time.sleep(0.02)
            continue
        ledger.record(STREAM, answer["positions"], payloads)


def operator(url, token, scales, stop):
    """Splits the widest active segment in two, then merges the first two neighbours, and so on,
    each scale naming the epoch it saw."""
    turn = 0
    while not stop.is_set():
        turn += 1
        try:
            with Client(url, token=token, timeout=5) as cbr:
                detail = cbr.request("GET", f"streams/{STREAM}/")
                active = sorted((s for s in detail["segments"] if not s["sealed"]), key=lambda s: s["key_range"][0])
                if turn % 2 or len(active) < 2:
                    widest = max(active, key=lambda s: s["key_range"][1] - s["key_range"][0])
                    lo, hi = widest["key_range"]
                    body = {"seal": [widest["id"]], "new_ranges": [[lo, (lo + hi) / 2], [(lo + hi) / 2, hi]]}
                else:
                    a, b = active[0], active[1]
                    body = {"seal": [a["id"], b["id"]], "new_ranges": [[a["key_range"][0], b["key_range"][1]]]}
                answer = cbr.request("POST", f"streams/{STREAM}/scale/", {**body, "epoch": detail["epoch"]})
                scales.append(answer["epoch"])
        except (OSError, CBRError):
            time.sleep(0.05)
        time.sleep(0.05)


def read_everything(cbr) -> list[dict]:
    events, cut = [], None
    while True:
        query = "limit=500" + ("" if cut is None else "&from=" + urllib.parse.quote(json.dumps(cut)))
        page = cbr.request("GET", f"streams/{STREAM}/events/?{query}")
        if not page["events"]:
            return events
        events += page["events"]
        cut = page["next_cut"]


def check_one_epoch(name: str) -> None:
    stream = stream_named(name)
    layout = stream.layout
    epochs = list(Scaling.objects.filter(stream=stream).order_by("epoch").values_list("epoch", flat=True))
    assert epochs == list(range(1, stream.epoch + 1))  # one record per epoch, none missing or extra
    assert layout.epoch == stream.epoch and len(layout.active_ids) == stream.segment_count
    assert set(Segment.objects.filter(stream=stream).values_list("segment_id", flat=True)) == set(layout.ids)
    covered = sorted((layout[s].lo, layout[s].hi) for s in layout.active_ids)
    assert covered[0][0] == 0.0 and covered[-1][1] == 1.0
    assert all(a[1] == b[0] for a, b in zip(covered, covered[1:]))  # the active ranges tile [0, 1)


def test_kill_9_during_scales_leaves_one_epoch_and_every_key_in_order(small_chunks, web_server, token):
    services.do_create_stream(scope="faults", name="scaled", segment_count=1)
    ledger, scales, stop = PublishLedger(), [], threading.Event()
    threads = [threading.Thread(target=producer, args=(web_server.url, token, k, ledger, stop)) for k in KEYS]
    threads.append(threading.Thread(target=operator, args=(web_server.url, token, scales, stop)))
    for t in threads:
        t.start()
    for _ in range(3):
        time.sleep(1.0)
        web_server.kill()  # wherever the scale is: before, inside or after its commit, before its seal
        time.sleep(0.2)
        check_one_epoch(STREAM)
        web_server.start()
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join(30)
    check_one_epoch(STREAM)
    assert len(scales) >= 3 and stream_named(STREAM).epoch >= 3  # it scaled on after the kills

    check_published_intact(ledger)
    events = read_everything(Client(web_server.url, token=token))
    got = [(e["segment"], e["offset"]) for e in events]
    assert len(got) == len(set(got))  # each once
    assert set(ledger.events[STREAM]) <= set(got)
    by_key = defaultdict(list)
    for e in events:
        key, batch_no, i = e["payload"].split("|")
        by_key[key].append((int(batch_no), int(i)))
    answered = defaultdict(list)
    for payload in ledger.events[STREAM].values():
        key, batch_no, i = payload.decode().split("|")
        answered[key].append((int(batch_no), int(i)))
    for key in KEYS:
        # the answered events come in the order they were published (a batch whose answer was
        # lost may sit among them: it was written, once)
        seen = [x for x in by_key[key] if x in set(answered[key])]
        assert seen == sorted(answered[key]), key
