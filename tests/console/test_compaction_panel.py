"""The stream page's compaction panel (docs/compaction.md): what a person sees of a
compacted stream's current generation and its runs, the warning when beat compacts less often
than the live log keeps events, and Compact now through the real queue_run and broker. The rows
are written directly: no Spark here (tests/compaction runs it)."""

import re
from datetime import timedelta

import factories
import pytest
from django.test import Client
from django.utils import timezone
from page_text import rows, text

from compaction.models import CompactedView, CompactionRun
from domain.compaction import max_may_outrun_compaction
from domain.events import EventIn
from domain.quantities import size_text as filesizeformat
from streams import logs, services

pytestmark = pytest.mark.django_db

PAGE = "/streams/shop/profiles/"
PANEL = PAGE + "compaction/"
RUN = PAGE + "compaction/run/"
HISTORY_COLUMNS = 11


@pytest.fixture(autouse=True)
def hourly(settings):
    settings.CBR_COMPACTION_INTERVAL = 3600


def make_stream(policy=None, cleanup_policy="compact"):
    return factories.make_stream(
        "profiles",
        segment_count=2,
        cleanup_policy=cleanup_policy,
        compaction={"delete_retention_s": 100, "min_compaction_lag_s": 60},
        policy=policy,
    )


def add_run(stream, minutes_ago: int, **fields) -> CompactionRun:
    """A run as the worker leaves it, created `minutes_ago` and taking `took` seconds."""
    took = fields.pop("took", None)
    run = CompactionRun.objects.create(stream=stream, **fields)
    created = timezone.now() - timedelta(minutes=minutes_ago)
    started = created + timedelta(seconds=1)
    CompactionRun.objects.filter(pk=run.pk).update(
        created_at=created,
        started_at=started if fields.get("state") != "queued" else None,
        finished_at=started + timedelta(seconds=took) if took is not None else None,
    )
    run.refresh_from_db()
    return run


@pytest.fixture
def stream():
    """A compacted stream at generation 3 after five runs: three succeeded, one skipped, one failed."""
    stream = make_stream({"limit_type": "time", "min": 7200})
    add_run(
        stream,
        50,
        state="succeeded",
        trigger="beat",
        generation=1,
        events_in=1000,
        events_out=400,
        keys=390,
        keyless_dropped=2,
        bytes_before=100_000,
        bytes_after=40_000,
        took=12.5,
        phase="done",
    )
    add_run(stream, 40, state="skipped", trigger="beat", generation=1, took=0.2, phase="nothing new")
    add_run(
        stream,
        30,
        state="succeeded",
        trigger="console",
        generation=2,
        events_in=900,
        events_out=600,
        keys=590,
        tombstones_dropped=7,
        marked_by_retention=3,
        bytes_before=90_000,
        bytes_after=60_000,
        took=8,
        phase="done",
    )
    add_run(
        stream,
        20,
        state="failed",
        trigger="api",
        took=3,
        phase="compacting 2 chunks",
        error="Py4JJavaError: java.lang.OutOfMemoryError: Java heap space",
    )
    add_run(
        stream,
        10,
        state="succeeded",
        trigger="beat",
        generation=3,
        events_in=2000,
        events_out=1244,
        keys=1234,
        tombstones_dropped=1,
        bytes_before=150_000,
        bytes_after=56_789,
        took=20.4,
        phase="done",
    )
    CompactedView.objects.create(
        stream=stream,
        generation=3,
        directory="gen-3",
        horizon={"0": 120, "1": 80},
        keys=1234,
        tombstones=10,
        bytes=56_789,
        switched_at=timezone.now() - timedelta(minutes=10),
    )
    return stream


def history(html: str) -> list[list[str]]:
    """The run history's rows, newest first, each with its error (the row under a failed run)."""
    table = html.split('<table class="runs">')[1].split("</table>")[0]
    found = []
    for cells in rows(table.split("</thead>")[1]):
        if len(cells) == HISTORY_COLUMNS:
            found.append([*cells, ""])
        else:
            found[-1][-1] = cells[0]
    return found


def size(n: int) -> str:
    return " ".join(filesizeformat(n).split())


def chart_titles(html: str) -> list[str]:
    return re.findall(r'<div class="due-bar" title="([^"]+)"', html)


def test_the_panel_shows_the_current_generation(admin_client, stream):
    page = text(admin_client.get(PAGE).content.decode())
    assert "Generation 3 switched 10 minutes ago" in page
    assert "Horizon 0:120 · 1:80 " in page
    assert "Keys 1,234 Tombstones 10 Bytes 55.5 KiB payload" in page
    assert "min lag 1 min · tombstones kept 1 min 40 s" in page


def test_the_panel_shows_the_last_run_and_its_duration(admin_client, stream):
    page = text(admin_client.get(PAGE).content.decode())
    assert f"Last run succeeded #{stream.compaction_runs.first().pk} · beat done · took 20.4 s · 9 minutes ago" in page


def test_the_history_lists_every_run_with_its_numbers(admin_client, stream):
    runs = history(admin_client.get(PAGE).content.decode())
    assert [r[1:4] for r in runs] == [
        ["3", "succeeded", "beat"],
        ["—", "failed", "api"],
        ["2", "succeeded", "console"],
        ["1", "skipped", "beat"],
        ["1", "succeeded", "beat"],
    ]
    # events in → out, keys, tombstones dropped, marked by retention, keyless dropped, bytes, duration
    assert runs[0][4:11] == ["2,000 → 1,244", "1,234", "1", "0", "0", f"{size(150_000)} → {size(56_789)}", "20.4 s"]
    assert runs[2][4:11] == ["900 → 600", "590", "7", "3", "0", "87.9 KiB → 58.6 KiB", "8.0 s"]
    assert runs[4][4:11] == ["1,000 → 400", "390", "0", "0", "2", "97.7 KiB → 39.1 KiB", "12.5 s"]
    assert runs[1][4:] == ["—"] * 6 + ["3.0 s", "Py4JJavaError: java.lang.OutOfMemoryError: Java heap space"]
    assert runs[3][4:] == ["—"] * 6 + ["0.2 s", ""]  # skipped: nothing new, nothing counted
    assert all(r[11] == "" for r in runs if r[2] != "failed")


def test_the_chart_has_bytes_before_and_after_of_each_successful_run_oldest_first(admin_client, stream):
    html = admin_client.get(PAGE).content.decode()
    assert chart_titles(html) == [
        f"generation 1: {filesizeformat(100_000)} → {filesizeformat(40_000)}",
        f"generation 2: {filesizeformat(90_000)} → {filesizeformat(60_000)}",
        f"generation 3: {filesizeformat(150_000)} → {filesizeformat(56_789)}",
    ]
    # heights are shares of the tallest bar, 150 000 bytes: 67% and 27% for generation 1
    bars = re.findall(r'style="height:(\d+)%', html.split('aria-label="payload bytes before and after')[1])
    assert bars[:6] == ["67", "27", "60", "40", "100", "38"]
    assert f"peak {size(150_000)}" in text(html)


def test_the_chart_and_the_history_keep_the_last_twenty(admin_client, stream):
    for gen in range(4, 30):
        add_run(
            stream,
            9 - gen / 10,
            state="succeeded",
            generation=gen,
            bytes_before=gen * 1000,
            bytes_after=gen * 500,
            took=1,
        )
    html = admin_client.get(PAGE).content.decode()
    assert [t.split(":")[0] for t in chart_titles(html)] == [f"generation {g}" for g in range(10, 30)]
    assert [r[1] for r in history(html)] == [str(g) for g in range(29, 9, -1)]


def test_a_running_run_shows_its_phase_as_the_panel_polls(admin_client, stream):
    run = add_run(stream, 0, state="running", trigger="console", phase="compacting 3 chunks")
    html = admin_client.get(PANEL, HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="compaction-panel"')
    assert 'hx-trigger="every 3s"' in html and f'hx-get="{PANEL}"' in html
    assert "<html" not in html and "Truncation history" not in html  # the panel, not the page
    page = text(html)
    assert f"Last run running #{run.pk} · console compacting 3 chunks, started now" in page
    assert history(html)[0][1:4] == ["—", "running compacting 3 chunks", "console"]
    # when the worker moves on, the next poll says so
    CompactionRun.objects.filter(pk=run.pk).update(phase="writing generation 4")
    assert "writing generation 4" in text(admin_client.get(PANEL, HTTP_HX_REQUEST="true").content.decode())


def test_a_stream_never_compacted_says_so(admin_client):
    make_stream()
    page = text(admin_client.get(PAGE).content.decode())
    assert "Generation none yet: the first successful run writes generation 1" in page
    assert "Last run none yet" in page and "No successful run yet" in page and "No runs yet" in page


def test_a_stream_that_is_not_compacted_has_no_panel(admin_client):
    make_stream(cleanup_policy="delete")
    assert "Compaction" not in admin_client.get(PAGE).content.decode()
    assert admin_client.get(PANEL, HTTP_HX_REQUEST="true").content.decode().strip() == ""
    assert admin_client.post(RUN, HTTP_HX_REQUEST="true").status_code == 400
    assert not CompactionRun.objects.exists()


WARNING = "The max limit may remove events before compaction reads them."


def test_it_warns_when_the_interval_is_longer_than_the_time_retentions_max(admin_client, settings):
    make_stream({"limit_type": "time", "min": 600, "max": 1800})
    page = text(admin_client.get(PAGE).content.decode())
    assert WARNING in page
    assert "not past the time retention's max (30 min), and beat compacts only every 1 h" in page


@pytest.mark.parametrize(
    "policy, interval_s",
    [
        ({"limit_type": "time", "min": 60, "max": 7200}, 3600),  # compacted twice before the max
        ({"limit_type": "time", "min": 60, "max": 3600}, 3600),  # just in time
        ({"limit_type": "time", "min": 1800}, 3600),  # no max: retention waits for the compactor
        ({"limit_type": "size", "min": 10, "max": 100}, 3600),  # no time to compare with
        ({"limit_type": "none"}, 3600),
        (None, 3600),
    ],
)
def test_it_does_not_warn_when_retention_waits_for_compaction(admin_client, settings, policy, interval_s):
    settings.CBR_COMPACTION_INTERVAL = interval_s
    make_stream(policy)
    page = text(admin_client.get(PAGE).content.decode())
    assert "Compaction" in page and WARNING not in page


def test_the_warning_follows_the_interval_setting(admin_client, settings):
    make_stream({"limit_type": "time", "min": 60, "max": 7200})
    settings.CBR_COMPACTION_INTERVAL = 3 * 3600  # now longer than the 2 h max
    page = text(admin_client.get(PANEL, HTTP_HX_REQUEST="true").content.decode())
    assert WARNING in page and "every 3 h" in page and "max (2 h)" in page


def test_the_rule_compares_the_interval_with_the_time_maximum():
    policy = factories.make_stream("p", policy={"limit_type": "time", "min": 60, "max": 7200}).retention_policy
    assert not max_may_outrun_compaction(7200, policy)
    assert max_may_outrun_compaction(7201, policy)
    assert not max_may_outrun_compaction(10**9, None)


def test_a_run_that_missed_events_says_which(admin_client, stream):
    add_run(stream, 1, state="succeeded", generation=4, missed={"1": [40, 55]}, missed_events=15, took=2)
    page = text(admin_client.get(PANEL, HTTP_HX_REQUEST="true").content.decode())
    assert "Missed 15 events: retention's max limit removed offsets 40–54 of segment 1 before a run read them." in page


def test_seal_and_compact_now_seals_the_active_chunks_then_queues_a_run(admin_client, stream, test_broker):
    services.do_publish(stream, [EventIn(b"x", key=b"k")])
    answer = admin_client.post(RUN, {"seal": "1"}, HTTP_HX_REQUEST="true")
    page = text(answer.content.decode())
    assert "Sealed 1 active chunk. Compaction #" in page and "queued." in page
    log = logs.stream_log(stream)
    assert sum(len(log.segment(s).sealed_chunks()) for s in ("0", "1")) == 1
    assert CompactionRun.objects.filter(stream=stream, trigger="console", state="queued").count() == 1


def test_compact_now_queues_a_console_run_and_answers_with_the_panel(admin_client, stream, test_broker):
    # when an admin presses Compact now
    html = admin_client.post(RUN, HTTP_HX_REQUEST="true").content.decode()
    # then one run is queued by the console and the panel says so
    run = CompactionRun.objects.get(state="queued")
    assert (run.stream, run.trigger, run.error) == (stream, "console", "")
    assert html.lstrip().startswith('<div id="compaction-panel"')
    page = text(html)
    assert f"Compaction #{run.pk} queued." in page
    assert f"Last run queued #{run.pk} · console waiting for a worker" in page
    assert history(html)[0][2:4] == ["queued", "console"]


def test_a_second_click_while_one_is_queued_says_it_is_busy(admin_client, stream, test_broker):
    admin_client.post(RUN, HTTP_HX_REQUEST="true")
    answer = admin_client.post(RUN, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    page = text(answer.content.decode())
    assert "A compaction of shop/profiles is already queued or running: this one was not queued." in page
    assert 'class="notice warn" role="status"' in answer.content.decode()
    assert CompactionRun.objects.filter(state="queued").count() == 1


def test_compact_now_passes_the_csrf_check_with_htmx_header(admin_user, stream, test_broker):
    client = factories.console_client(admin_user, Client(enforce_csrf_checks=True))
    page = client.get(PAGE).content.decode()
    assert f'hx-post="{RUN}"' in page and 'hx-target="#compaction-panel"' in page
    assert client.post(RUN, HTTP_HX_REQUEST="true").status_code == 403  # no token: refused
    token = re.search(r'"X-CSRFToken": "([^"]+)"', page).group(1)
    answer = client.post(RUN, HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN=token)
    assert answer.status_code == 200 and "queued." in text(answer.content.decode())
    assert CompactionRun.objects.filter(trigger="console", state="queued").count() == 1


def test_compact_now_without_javascript_goes_back_to_the_page(admin_client, stream, test_broker):
    answer = admin_client.post(RUN)
    assert answer.status_code == 302 and answer.url == PAGE
    assert CompactionRun.objects.filter(trigger="console", state="queued").count() == 1


def test_a_viewer_sees_the_panel_but_cannot_compact(client, plain_user, stream):
    client.force_login(plain_user)
    html = client.get(PAGE).content.decode()
    assert "Generation 3" in text(html) and "Compact now" not in html
    assert client.post(RUN, HTTP_HX_REQUEST="true").status_code == 403
    assert not CompactionRun.objects.filter(state="queued").exists()
