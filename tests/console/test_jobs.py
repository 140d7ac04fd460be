"""The jobs page: retention cycles and compactions in one list with their state, progress,
duration, result and trigger; refreshed while one runs; a cycle's own page, and its progress
fragment asking the stream page to reload once the cycle is over."""

from datetime import timedelta

import factories
import pytest
from django.utils import timezone
from page_text import rows, text

from compaction.models import CompactionRun
from retention.models import RetentionCycle

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(data_dir, admin_user):
    stream = factories.make_stream("orders", cleanup_policy="compact")
    t = timezone.now()
    done = RetentionCycle.objects.create(
        trigger="console", requested_by=admin_user, stream=stream, state="done", streams_total=1, streams_done=1,
        truncations=2, bytes_reclaimed=2048, started_at=t - timedelta(seconds=3), finished_at=t - timedelta(seconds=1),
    )  # fmt: skip
    failed = RetentionCycle.objects.create(trigger="beat", state="failed", error="database went away", started_at=t)
    compaction = CompactionRun.objects.create(
        stream=stream, state="done", trigger="api", events_in=100, events_out=40, bytes_before=5000, bytes_after=2000,
        started_at=t - timedelta(seconds=9), finished_at=t - timedelta(seconds=5),
    )  # fmt: skip
    return done, failed, compaction


def test_the_jobs_page_lists_cycles_and_compactions(admin_client, runs):
    done, failed, compaction = runs
    html = admin_client.get("/jobs/").content.decode()
    table = {r[0]: r for r in rows(html) if r}
    cycle = table[f"retention cycle {done.pk}"]
    assert cycle[1:4] == ["shop/orders", "console by ada", "done"]
    assert "2.0 s" in cycle and "2 truncations, 2.0 KiB reclaimed" in cycle
    assert table[f"retention cycle {failed.pk}"][1] == "every stream with a policy"
    assert "database went away" in table[f"retention cycle {failed.pk}"][-1]
    assert "100 → 40 events, 4.9 KiB → 2.0 KiB" in table[f"compaction {compaction.pk}"][-1]
    assert 'hx-trigger="every 2s"' not in html  # nothing runs: no polling

    only = [r[0] for r in rows(admin_client.get("/jobs/?kind=compactions").content.decode()) if r]
    assert only == [f"compaction {compaction.pk}"]
    failed_only = text(admin_client.get("/jobs/?state=failed").content.decode())
    assert f"retention cycle {failed.pk}" in failed_only and f"retention cycle {done.pk}" not in failed_only


def test_a_running_job_makes_the_list_poll(admin_client, runs):
    RetentionCycle.objects.create(trigger="beat", state="running", streams_total=10, streams_done=4)
    html = admin_client.get("/jobs/").content.decode()
    assert 'hx-trigger="every 2s"' in html and "4 / 10 streams" in text(html)


def test_a_cycle_has_its_own_page_and_its_poll_reloads_the_stream_page_when_over(admin_client, runs):
    done, _, _ = runs
    page = text(admin_client.get(f"/cycles/{done.pk}/").content.decode())
    assert (
        f"Retention cycle {done.pk}" in page and "console by ada" in page and "2 truncations, 2.0 KiB reclaimed" in page
    )
    polled = admin_client.get(f"/cycles/{done.pk}/?polled=1", HTTP_HX_REQUEST="true")
    assert polled["HX-Refresh"] == "true" and "<html" not in polled.content.decode()
    running = RetentionCycle.objects.create(trigger="beat", state="running", streams_total=3)
    still = admin_client.get(f"/cycles/{running.pk}/?polled=1", HTTP_HX_REQUEST="true")
    assert "HX-Refresh" not in still and "?polled=1" in still.content.decode()
