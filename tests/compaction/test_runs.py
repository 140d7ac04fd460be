"""Compaction runs end to end: settings and keyless refusal over the API, a run on Spark
switching generations, the compacted view over REST, never two runs at once, and a run killed
between writing and switching."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta

import factories
import pytest
from django.db import connection
from integration.conftest import _database_url
from page_text import rows

from cbr_client import READ_BATCH, decode_read_batch
from compaction.models import CompactionRun
from compaction.runs import compaction_lock, execute, view_dir, warm_up
from compaction.tasks import compact_due_streams
from streams import logs
from streams.logs import seal_active_chunks
from streams.models import Stream

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

S = "/api/v1/streams/shop/profiles/"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def spark_ready(spark):
    return spark


def make(api, **settings):
    """shop/profiles, compacted with a delete retention of 100 s unless `settings` say otherwise."""
    return factories.create_stream_over_api(
        api, "profiles", **{"cleanup_policy": "compact", "delete_retention_s": 100, **settings}
    )


def publish(api, *events):
    """(key, value or None for a tombstone) events to shop/profiles."""
    factories.publish_over_api(api, [{"key": k, "payload": v or ""} for k, v in events], stream="shop/profiles")


def view(api, **params):
    answer = api.get(S + "compacted/", params)
    assert answer.status_code == 200, answer.content
    return answer.json()


def as_dict(page):
    return {e["key"]: (None if e["tombstone"] else e["payload"]) for e in page["events"]}


def run(stream, at, seal=True):
    return execute(CompactionRun.objects.create(stream=stream, trigger="command"), now=at, seal=seal)


def test_the_worked_example_through_the_api(api, spark_ready):
    stream = make(api)
    publish(api, ("A", "1"), ("B", "1"), ("A", "2"), ("C", "1"), ("B", None))
    t = datetime.now(UTC)
    seal_active_chunks(stream)
    publish(api, ("D", "1"))  # the active chunk: on the live log only
    first = run(stream, t + timedelta(seconds=10), seal=False)
    assert first.state == "succeeded" and first.generation == 1
    assert (first.events_in, first.events_out, first.keys, first.tombstones_dropped) == (5, 3, 3, 0)
    page = view(api)
    assert as_dict(page) == {"A": "2", "C": "1", "B": None} and page["generation"] == 1
    assert page["horizon"] == {"0": 5}
    # a view event is the live log's event, field for field and in the same time format
    live = {(e["segment"], e["offset"]): e for e in api.get(S + "events/").json()["events"]}
    for event in page["events"]:
        assert {**live[(event["segment"], event["offset"])], "tombstone": event["tombstone"]} == event
    second = run(stream, t + timedelta(seconds=200))
    assert second.generation == 2 and second.tombstones_dropped == 1 and second.events_in == 4
    assert as_dict(view(api)) == {"A": "2", "C": "1", "D": "1"}
    assert sorted(p.name for p in view_dir(stream).iterdir()) == ["gen-2"]  # the old one went
    assert run(stream, t + timedelta(seconds=300), seal=False).state == "skipped"  # nothing new
    history = api.get(S + "compactions/").json()["results"]  # a page, like every list
    assert [(h["state"], h["generation"]) for h in history] == [("skipped", 2), ("succeeded", 2), ("succeeded", 1)]
    assert (history[2]["bytes_before"], history[2]["bytes_after"]) == (4, 2)  # 1+1+1+1+0 → A=2, C=1, B=∅


def test_compact_delete_marks_the_view_by_time_and_reads_page_by_key(api, spark_ready):
    stream = make(api, cleanup_policy="compact,delete", compacted_retention_bytes=10)
    publish(api, *[(f"k{i:02d}", "abcd") for i in range(8)])
    run(stream, datetime.now(UTC) + timedelta(seconds=1))
    got = as_dict(view(api))
    assert got == {"k05": "abcd", "k06": "abcd", "k07": "abcd"} or len(got) == 2  # 3 × 4 B > 10 B
    assert sum(len(v) for v in got.values()) <= 10
    run_row = CompactionRun.objects.filter(stream=stream, state="succeeded").get()
    assert run_row.marked_by_retention == 8 - len(got)
    first = view(api, limit=1)
    assert len(first["events"]) == 1 and first["next_after"] == first["events"][0]["key"]
    rest = view(api, after=first["next_after"], limit=100)
    assert [e["key"] for e in first["events"] + rest["events"]] == sorted(got) and rest["next_after"] is None
    assert as_dict(view(api, key=sorted(got)[-1])) == {sorted(got)[-1]: "abcd"}


def test_keyless_events_are_refused_and_settings_checked(api):
    make(api)
    answer = api.post(S + "events/", {"events": [{"payload": "x"}]}, format="json")
    assert answer.status_code == 400 and answer.json()["field"] == "events[0].key"
    bad = api.post("/api/v1/streams/", {"scope": "shop", "name": "x", "delete_retention_s": -1}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "delete_retention_s"
    bad = api.post("/api/v1/streams/", {"scope": "shop", "name": "y", "cleanup_policy": "squash"}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "cleanup_policy"
    plain = api.post("/api/v1/streams/", {"scope": "shop", "name": "plain"}, format="json")
    assert plain.status_code == 201
    assert api.get("/api/v1/streams/shop/plain/compacted/").status_code == 409


def test_a_second_compaction_while_one_runs_is_refused_with_409(api):
    stream = make(api)
    with compaction_lock(stream) as got:
        assert got
        answer = api.post(S + "compactions/")
        assert answer.status_code == 409 and answer.json()["code"] == "compaction_running"
    assert not CompactionRun.objects.filter(stream=stream).exists()


def test_beat_compacts_every_compacted_stream_with_something_new(api, spark_ready):
    stream = make(api)
    publish(api, ("A", "1"), ("A", "2"))
    seal_active_chunks(stream)
    assert compact_due_streams() == 1
    assert as_dict(view(api)) == {"A": "2"}
    assert compact_due_streams() == 0  # nothing new: no run recorded
    assert CompactionRun.objects.filter(stream=stream).count() == 1


def test_beat_compacts_several_streams_at_once_each_to_its_own_view(api, spark_ready, settings):
    settings.CBR_COMPACTION_STREAMS_AT_ONCE = 3
    names = [f"p{i}" for i in range(5)]
    for i, name in enumerate(names):
        stream = factories.create_stream_over_api(api, name, cleanup_policy="compact", delete_retention_s=100)
        events = [{"key": f"k{k}", "payload": f"{name}-{k}-{v}"} for v in range(3) for k in range(i + 1)]
        factories.publish_over_api(api, events, stream=f"shop/{name}")
        seal_active_chunks(stream)

    assert compact_due_streams() == 5

    for i, name in enumerate(names):
        answer = api.get(f"/api/v1/streams/shop/{name}/compacted/")
        assert as_dict(answer.json()) == {f"k{k}": f"{name}-{k}-2" for k in range(i + 1)}
    runs = list(CompactionRun.objects.filter(stream__name__in=names).order_by("started_at"))
    assert [r.state for r in runs] == ["succeeded"] * 5
    if connection.vendor == "sqlite":  # one writer at a time: one stream at a time
        assert all(a.finished_at <= b.started_at for a, b in zip(runs, runs[1:]))
    else:
        assert runs[1].started_at < runs[0].finished_at  # at once, not one after another


def test_a_run_killed_between_writing_and_switching_leaves_the_old_generation_whole_and_the_next_run_goes_at_once(
    api, spark_ready, settings, tmp_path, test_broker
):
    stream = make(api)
    publish(api, ("A", "1"), ("B", "1"))
    first = run(stream, datetime.now(UTC) + timedelta(seconds=1))
    assert first.generation == 1
    publish(api, ("A", "2"), ("C", "1"))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "cbrweb.settings",
        "DATABASE_URL": _database_url(connection.settings_dict),
        "REDIS_URL": settings.REDIS_URL,
        "CBR_DATA_DIR": str(settings.CBR_DATA_DIR),
        "CBR_VAR_DIR": str(tmp_path / "var"),
        "CBR_COMPACTION_PAUSE_BEFORE_SWITCH_S": "60",
        "PYTHONPATH": ROOT,
        "SPARK_MASTER": "local[1]",
    }
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "compact_stream", "shop/profiles", "--seal"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 300  # (a process starting Django and Spark on a loaded machine)
    while not CompactionRun.objects.filter(stream=stream, phase="written, switching").exists():
        assert proc.poll() is None and time.monotonic() < deadline, (
            proc.stdout.read()[-3000:] if proc.poll() is not None else "slow"
        )
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert (view_dir(stream) / "gen-2").exists()  # written, never switched to
    assert as_dict(view(api)) == {"A": "1", "B": "1"} and view(api)["generation"] == 1  # the old one, whole
    killed = CompactionRun.objects.get(phase="written, switching")
    assert killed.state == "running"
    # the next request is not refused for the dead run (its lock is taken over, the run marked
    # failed at once), and the queued run succeeds, well within a minute of the kill
    answer = api.post("/api/v1/streams/shop/profiles/compactions/")
    assert answer.status_code == 202, answer.content
    killed.refresh_from_db()
    assert killed.state == "failed" and "process" in killed.error
    again = execute(CompactionRun.objects.get(pk=answer.json()["id"]), datetime.now(UTC) + timedelta(seconds=2))
    assert again.state == "succeeded" and again.generation == 2
    assert as_dict(view(api)) == {"A": "2", "B": "1", "C": "1"}
    assert CompactionRun.objects.get(phase="written, switching").state == "failed"
    assert sorted(p.name for p in view_dir(stream).iterdir()) == ["gen-2"]


def test_a_read_compacted_group_reads_the_view_then_the_live_log(api, spark_ready):
    stream = make(api, segment_count=1)
    publish(api, ("A", "1"), ("B", "1"), ("A", "2"), ("C", "1"), ("B", None), ("C", "2"))
    run(stream, datetime.now(UTC) + timedelta(seconds=1))  # view A=2 B=∅ C=2, horizon 6
    publish(api, ("A", "3"), ("D", "1"))  # the live log after the horizon
    logs.stream_log(stream).truncate({"0": 4})  # retention trimmed the live log below the horizon
    body = {
        "scope": "shop",
        "name": "table",
        "streams": ["shop/profiles"],
        "retention_type": "NONE",
        "read_compacted": True,
    }
    assert api.post("/api/v1/reader-groups/", body, format="json").status_code == 201
    # a twin group reads the same in binary (Accept): view records decode as their JSON
    assert api.post("/api/v1/reader-groups/", {**body, "name": "table-bin"}, format="json").status_code == 201
    got = []
    for _ in range(4):
        batch = api.post("/api/v1/reader-groups/shop/table/read/", {"max_events": 2}, format="json").json()[
            "deliveries"
        ]
        binary = api.post(
            "/api/v1/reader-groups/shop/table-bin/read/", {"max_events": 2}, format="json", HTTP_ACCEPT=READ_BATCH
        )
        twin = decode_read_batch(binary.content)["deliveries"]
        unlike = {"delivery_id": None, "lease_expires_at": None}  # the group's, and read a moment apart
        assert [{**d, **unlike} for d in twin] == [{**d, **unlike} for d in batch]
        got += [(d["offset"], d["key"], d["payload"]) for d in batch]
        for group, answer in (("table", batch), ("table-bin", twin)):
            ids = [d["delivery_id"] for d in answer]
            api.post(f"/api/v1/reader-groups/shop/{group}/ack/", {"delivery_ids": ids}, format="json")
    assert got == [(2, "A", "2"), (4, "B", ""), (5, "C", "2"), (6, "A", "3"), (7, "D", "1")]
    positions = api.get("/api/v1/reader-groups/shop/table/").json()["positions"]
    assert [p["floor"] for p in positions] == [8]
    plain = {"scope": "shop", "name": "log", "streams": ["shop/profiles"], "retention_type": "NONE"}
    api.post("/api/v1/reader-groups/", plain, format="json")
    log = api.post("/api/v1/reader-groups/shop/log/read/", {"max_events": 10}, format="json").json()["deliveries"]
    assert [d["offset"] for d in log] == [4, 5, 6, 7]  # without read_compacted: the live log from its head


def test_turning_a_stream_with_keyless_events_compacted_is_allowed_and_says_what_the_view_leaves_out(api):
    assert api.post("/api/v1/streams/", {"scope": "shop", "name": "mixed"}, format="json").status_code == 201
    api.post(
        "/api/v1/streams/shop/mixed/events/",
        {"events": [{"payload": "a"}, {"payload": "b", "key": "k"}, {"payload": "c"}]},
        format="json",
    )
    seal_active_chunks(Stream.objects.get(name="mixed"))
    api.post("/api/v1/streams/shop/mixed/events/", {"events": [{"payload": "d"}]}, format="json")  # active chunk
    answer = api.patch("/api/v1/streams/shop/mixed/", {"cleanup_policy": "compact"}, format="json")
    assert answer.status_code == 200 and answer.json()["cleanup_policy"] == "compact"
    assert answer.json()["warnings"][0].startswith("3 events without a key")
    refused = api.post("/api/v1/streams/shop/mixed/events/", {"events": [{"payload": "e"}]}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "events[0].key"


def test_the_view_pages_by_key_across_all_files_of_a_generation(api, spark_ready):
    # given a generation written as several files (one per split of the input: here a chunk of
    # each of two segments, each with keys from all over the range)
    stream = make(api, segment_count=2)
    keys = [f"u{(i * 37) % 60:03d}" for i in range(60)]
    publish(api, *[(k, f"v{k}") for k in keys])
    run(stream, datetime.now(UTC) + timedelta(seconds=1))
    assert len(list((view_dir(stream) / "gen-1").glob("*.parquet"))) > 1
    # when a reader pages through it by key
    pages, after = [], None
    while True:
        page = view(api, limit=7, **({"after": after} if after else {}))
        pages.append([e["key"] for e in page["events"]])
        after = page["next_after"]
        if after is None:
            break
    # then every key comes once, in key order, seven a page
    assert [k for p in pages for k in p] == sorted(keys) and {len(p) for p in pages[:-1]} == {7}
    assert as_dict(view(api, key="u041")) == {"u041": "vu041"}


def test_the_warm_up_compacts_made_up_events_through_a_runs_steps_and_leaves_no_files(
    spark_ready, tmp_path, monkeypatch
):
    # its scratch directory in a temporary directory of this test's own: the system's is shared
    # with the other test processes, whose workers warm up too (one removed its own meanwhile)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    stats = warm_up(events=70)
    # 70 events over 7 keys, every fifth a tombstone: a first generation, one over it (40 more
    # events), one with the compacted retention (nothing old or large enough to mark)
    assert [(s.rows, s.marked) for s in stats] == [(7, 0), (7, 0), (7, 0)]
    assert list(tmp_path.iterdir()) == []


def test_the_console_browses_the_compacted_view(api, admin_client, spark_ready):
    stream = make(api)
    publish(api, ("A", "1"), ("B", "1"), ("A", "2"), ("B", None))
    run(stream, datetime.now(UTC) + timedelta(seconds=10))
    html = admin_client.get("/streams/shop/profiles/events/?view=compacted").content.decode()
    shown = [r for r in rows(html) if len(r) == 5]
    assert [(r[2], r[4]) for r in shown] == [("— key A", "2 1 byte"), ("— key B", "0 bytes")]  # B: a tombstone
    assert "tombstone" in shown[1][0] and "generation 1 · key order" in html
    only_a = [
        r
        for r in rows(admin_client.get("/streams/shop/profiles/events/?view=compacted&key=A").content.decode())
        if len(r) == 5
    ]
    assert len(only_a) == 1 and only_a[0][4].startswith("2")


def test_min_compaction_lag_holds_young_chunks_out_of_the_view_until_they_are_old_enough(api, spark_ready):
    """A sealed chunk whose newest event is younger than `min_compaction_lag_s` stays on the live
    log only (and so does every later chunk of its segment); a run once the lag has passed takes
    it."""
    stream = make(api, min_compaction_lag_s=3600)
    publish(api, ("A", "1"), ("B", "1"))
    seal_active_chunks(stream)
    publish(api, ("A", "2"))
    seal_active_chunks(stream)
    t = datetime.now(UTC)
    young = run(stream, t + timedelta(seconds=10), seal=False)
    assert young.state == "skipped" and young.chunks == 0  # both chunks younger than the lag
    assert as_dict(view(api)) == {}
    old = run(stream, t + timedelta(seconds=3700), seal=False)
    assert old.state == "succeeded" and old.chunks == 2
    assert as_dict(view(api)) == {"A": "2", "B": "1"}


def test_a_view_event_past_its_time_to_live_goes_to_no_read_compacted_group(api, spark_ready, clock):
    stream = make(api, segment_count=1)
    factories.publish_over_api(
        api,
        [{"key": "A", "payload": "brief", "ttl_s": 5}, {"key": "B", "payload": "kept"}, {"key": "C", "payload": "c"}],
        stream="shop/profiles",
    )
    run(stream, datetime.now(UTC) + timedelta(seconds=1))  # the view holds all three, horizon 3
    assert as_dict(view(api)) == {"A": "brief", "B": "kept", "C": "c"}
    body = {"scope": "shop", "name": "table", "streams": ["shop/profiles"], "retention_type": "NONE"}
    assert api.post("/api/v1/reader-groups/", {**body, "read_compacted": True}, format="json").status_code == 201
    clock.now += 60  # (the readers' clock started before the publish)

    read = api.post("/api/v1/reader-groups/shop/table/read/", {"max_events": 10}, format="json").json()
    assert [d["key"] for d in read["deliveries"]] == ["B", "C"]  # A's latest value expired
    assert api.get("/api/v1/reader-groups/shop/table/").json()["positions"][0]["floor"] == 1  # A passed, B held


def test_a_large_value_is_kept_by_the_view_and_served_from_it_once_the_log_lost_it(api, spark_ready, settings):
    settings.CBR_MAX_EVENT_BYTES = 1000  # what the view serves by URL rather than inline
    stream = make(api, segment_count=1)
    big = os.urandom(50_000)
    raw = api.generic("POST", S + "events/raw/?key=A", big, content_type="application/octet-stream")
    assert raw.status_code == 201, raw.content
    publish(api, ("B", "1"))
    run(stream, datetime.now(UTC) + timedelta(seconds=1))
    a, b = view(api)["events"]
    url = "/api/v1/streams/shop/profiles/events/0/0/payload/"
    assert (a["key"], a["payload_url"], a["payload_size"], a["tombstone"]) == ("A", url, len(big), False)
    assert "payload_b64" not in a and b["payload"] == "1"

    publish(api, ("C", "1"))
    logs.stream_log(stream).truncate({"0": 2})  # retention: the live log no longer holds A's event
    assert api.get(url).content == big  # from the view (its value, read from its Parquet file)
    part = api.get(url, HTTP_RANGE="bytes=10-19")
    assert part.status_code == 206 and part.content == big[10:20]

    group = {"scope": "shop", "name": "table", "streams": ["shop/profiles"], "retention_type": "NONE"}
    api.post("/api/v1/reader-groups/", {**group, "read_compacted": True}, format="json")
    got = api.post("/api/v1/reader-groups/shop/table/read/", {"max_events": 10}, format="json").json()["deliveries"]
    assert [(d["key"], d.get("payload_url")) for d in got] == [("A", url), ("B", None), ("C", None)]
