"""A new user's first hour in a real browser (Debian's Chromium, Playwright): create a stream with
a consumption-based policy, publish and browse events, create a subscriber, seek it, run a
retention cycle and watch it finish and truncate with its reason, edit a schedule. With
CBR_SCREENSHOTS=<dir>, every page is saved there (full page, and at 800 px and phone width) to
be looked at."""

import json
import os
import time
from datetime import timedelta
from pathlib import Path

import factories
import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from cbr_client import Client
from cbrweb.beat import Scheduler
from cbrweb.celery import app
from domain.events import EventIn
from groups.models import ReaderGroup
from groups.sampling import take_samples
from retention import services as retention_services
from retention.models import TruncationRecord
from store.tier.opening import tier_for
from streams import logs, services, tiering
from streams.models import Stream, TierObject

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SHOTS = os.environ.get("CBR_SCREENSHOTS")


def shot(page, name: str, widths=(1280,)) -> None:
    if not SHOTS:
        return
    Path(SHOTS).mkdir(parents=True, exist_ok=True)
    for width in widths:
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=f"{SHOTS}/{name}-{width}.png", full_page=True)
        if width <= 420:  # a phone: also screen by screen, as a person scrolls it (a long page
            # shrunk to fit a viewer is unreadable)
            height = page.evaluate("document.documentElement.scrollHeight")
            for n, top in enumerate(range(0, height, 800)):
                clip = {"x": 0, "y": top, "width": width, "height": min(844, height - top)}
                page.screenshot(path=f"{SHOTS}/{name}-{width}-screen{n + 1}.png", full_page=True, clip=clip)
    page.set_viewport_size({"width": 1280, "height": 900})


def sign_in(page, url: str, username: str) -> None:
    """Through the sign-in page, as a person does (the factories' password: `pw-<name>-123`)."""
    page.goto(f"{url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"pw-{username}-123")
    page.click("button[type=submit]")
    page.wait_for_selector("text=Dashboard")


@pytest.fixture
def cycles_inline(monkeypatch):
    """What a worker would do with the queued cycle, done inside the request."""
    monkeypatch.setattr("django_celery_beat.schedulers.close_old_connections", lambda: None)
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


def test_a_new_users_first_hour(live_server, admin_user, browser_page, cycles_inline, data_dir, settings):
    settings.CBR_RETENTION_INTERVAL = 1
    page = browser_page
    page.on("dialog", lambda dialog: dialog.accept())  # htmx's confirmations
    url = live_server.url
    sign_in(page, url, "ada")
    shot(page, "dashboard", (1280, 800, 390))

    # a stream, with its policy
    page.click("nav >> text=Streams")
    page.click("text=New stream")
    shot(page, "stream-new")
    page.fill("#id_scope", "shop")
    page.fill("#id_name", "orders")
    page.select_option("#id_limit_type", "size")
    page.fill("#id_min", "0")
    page.check("#id_consumption_based")
    page.click("text=Create stream")
    page.wait_for_selector("text=Stream shop/orders created.")
    assert Stream.objects.get(name="orders").retention_policy.consumption_based

    # three events published and browsed
    page.click("text=Browse events")
    for n in (1, 2, 3):
        if not page.is_visible("#payload"):
            page.click("summary >> text=Publish an event")
        page.fill("#payload", f'{{"order": {n}, "state": "created"}}')
        page.fill("#routing_key", "customer-7")
        page.click("button >> text=Publish")
        page.wait_for_selector(f"text=Published at segment 0, offset {n - 1}.")
    page.goto(f"{url}/streams/shop/orders/events/?format=json")
    body = page.inner_text("table.events")
    assert body.count('"state": "created"') == 3 and '"order": 3' in body
    shot(page, "events", (1280, 390))

    # a subscriber, created on the stream's page
    page.goto(f"{url}/streams/shop/orders/")
    page.click("text=New reader group")
    page.fill("#id_name", "billing")
    page.select_option("#id_retention_type", "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT")
    shot(page, "group-new")
    page.click("text=Create reader group")
    page.wait_for_selector("text=Reader group shop/billing created.")
    group = ReaderGroup.objects.get(name="billing")
    assert [s.stream.name for s in group.subscription_set.all()] == ["orders"]

    # the stream says who holds its data back
    page.goto(f"{url}/streams/shop/orders/")
    panel = page.inner_text("#next-cycle")
    assert "shop/billing" in panel or "Would not truncate" in panel
    shot(page, "stream-held", (1280, 800, 390))

    # seek the subscriber to the tail: it no longer holds anything
    page.goto(f"{url}/reader-groups/shop/billing/")
    page.select_option("select[name=to]", "tail")
    page.click("button >> text=Seek")
    page.wait_for_selector("text=moved to tail")
    shot(page, "group", (1280, 390))

    # two samples a minute apart: the charts of rates and lag over time
    take_samples(timezone.now() - timedelta(seconds=60))
    take_samples(timezone.now())

    # a retention cycle run from the stream page: the page reloads when it is over
    page.goto(f"{url}/streams/shop/orders/")
    page.click("text=Run retention now")
    page.wait_for_selector("#history >> xpath=.. >> text=cbr:case-i:slb", timeout=30_000)
    record = TruncationRecord.objects.get()
    assert record.rule == "cbr:case-i:slb" and record.after_cut == {"0": 3}
    assert "Would not truncate" in page.inner_text("#next-cycle")
    assert page.locator("#over-time .ts-chart canvas").count() == 3  # uPlot drew the three charts
    shot(page, "stream-truncated", (1280, 800, 390))
    page.goto(f"{url}/jobs/")
    assert "retention cycle" in page.inner_text("#job-table") and "1 truncation" in page.inner_text("#job-table")
    shot(page, "jobs", (1280, 390))

    # a schedule edited
    Scheduler(app=app)  # what beat writes when it starts
    page.goto(f"{url}/schedules/")
    row = page.locator("tr", has_text="retention-cycle")
    row.locator("input[name=every_s]").fill("900")
    row.locator("button >> text=Save").click()
    page.wait_for_selector("text=retention-cycle: every 900 s, on.")
    assert PeriodicTask.objects.get(name="retention-cycle").interval.every == 900
    shot(page, "schedules", (1280, 390))


def test_a_person_changes_their_password_and_a_mistake_keeps_them_on_the_form(live_server, plain_user, browser_page):
    page = browser_page
    url = live_server.url
    sign_in(page, url, "bob")

    # the link on every page, then a new password typed twice differently
    page.click("text=Change password")
    page.fill("#id_old_password", "pw-bob-123")
    page.fill("#id_new_password1", "a-long-new-one-42")
    page.fill("#id_new_password2", "a-long-new-one-43")
    page.click("button >> text=Change password")
    page.wait_for_selector("text=The two password fields didn’t match.")
    shot(page, "password-mismatch", (1280, 390))

    # then done right: back on the dashboard, still signed in, the new password the one that works
    page.fill("#id_old_password", "pw-bob-123")
    page.fill("#id_new_password1", "a-long-new-one-42")
    page.fill("#id_new_password2", "a-long-new-one-42")
    page.click("button >> text=Change password")
    page.wait_for_selector("text=Your password was changed.")
    shot(page, "password-changed", (1280, 390))
    plain_user.refresh_from_db()
    assert plain_user.check_password("a-long-new-one-42")


def test_a_refused_publish_keeps_what_was_typed_and_says_why_beside_the_headers(
    live_server, operator_user, browser_page, data_dir
):
    services.do_create_stream(scope="shop", name="orders", segment_count=1)
    page = browser_page
    url = live_server.url
    sign_in(page, url, "olga")

    page.goto(f"{url}/streams/shop/orders/events/")
    page.click("summary >> text=Publish an event")
    page.fill("#payload", '{"order": 1}')
    page.fill("#routing_key", "customer-7")
    page.fill("#headers", "type: created\nsource")
    page.click("button >> text=Publish")
    error = page.wait_for_selector("text=is not name=value (or name: value)")
    shot(page, "publish-refused", (1280, 390))
    # beside the headers, with everything typed still there
    assert error.evaluate("e => e.closest('div').querySelector('#headers') !== null")
    assert page.input_value("#payload") == '{"order": 1}' and page.input_value("#routing_key") == "customer-7"
    assert page.input_value("#headers") == "type: created\nsource"

    page.fill("#headers", "type: created\nsource: shop")
    page.click("button >> text=Publish")
    page.wait_for_selector("text=Published at segment 0, offset 0.")


def test_dead_ends_have_a_way_out(live_server, plain_user, browser_page):
    page = browser_page
    url = live_server.url
    sign_in(page, url, "bob")

    page.goto(f"{url}/streams/shop/nope/")
    page.wait_for_selector("text=No stream shop/nope.")
    shot(page, "not-found", (1280, 390))
    page.goto(f"{url}/streams/new/")
    page.wait_for_selector("text=Your role (viewer) may not manage streams.")
    shot(page, "not-allowed", (1280,))
    page.click("main >> text=Dashboard")  # the way out
    page.wait_for_selector("text=Largest streams")


def test_the_event_browser_answers_keys_and_the_console_follows_a_dark_system(
    live_server, admin_user, browser_page, data_dir
):
    stream = services.do_create_stream(scope="shop", name="keys", segment_count=1)
    services.do_publish(stream, [EventIn(f'{{"n": {n}}}'.encode()) for n in range(60)])
    page = browser_page
    page.emulate_media(color_scheme="dark")
    sign_in(page, live_server.url, "ada")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(15, 19, 26)"  # the dark palette's
    page.goto(f"{live_server.url}/streams/shop/keys/events/")
    shot(page, "events-dark", (1280, 390))

    page.keyboard.press("v")  # text → pretty JSON
    page.wait_for_url("**format=json**")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.name") == "contains"
    page.keyboard.press("Escape")
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("n")  # the next page: events 50..59
    page.wait_for_url("**start=cut**")
    assert page.locator("table.events tbody tr").count() == 10
    page.keyboard.press("p")
    page.wait_for_function("!location.search.includes('start=cut')")


def test_a_live_tail_shows_an_event_published_meanwhile_and_pauses(live_server, admin_user, browser_page, data_dir):
    stream = services.do_create_stream(scope="shop", name="live", segment_count=1)
    services.do_publish(stream, [EventIn(b"before")])
    page = browser_page
    sign_in(page, live_server.url, "ada")
    page.goto(f"{live_server.url}/streams/shop/live/events/")
    page.check("#follow")
    page.wait_for_selector("#live-status >> text=following")

    services.do_publish(stream, [EventIn(b'{"order": "published meanwhile"}')])
    page.wait_for_selector('tr.live-new >> text={"order": "published meanwhile"}', timeout=10_000)
    shot(page, "live-tail", (1280,))

    page.uncheck("#follow")  # paused at once: the waiting read is let go, no other starts
    page.wait_for_selector("#live-status >> text=paused", timeout=3_000)
    services.do_publish(stream, [EventIn(b"while paused")])
    page.wait_for_timeout(1500)
    assert page.locator("text=while paused").count() == 0
    page.check("#follow")  # on again, from where it stopped
    page.wait_for_selector("tr.live-new >> text=while paused", timeout=10_000)


def test_search_export_republish_and_purge_in_the_browser(live_server, admin_user, browser_page, data_dir):
    stream = services.do_create_stream(scope="shop", name="flows", segment_count=1)
    services.do_publish(stream, [EventIn(f'{{"n": {n}, "amount": {n * 10}}}'.encode()) for n in range(20)])
    dlq = services.do_create_stream(scope="shop", name="flows-dlq", segment_count=1)
    origin = {"cbr-dlq-stream": "shop/flows", "cbr-dlq-segment": "0", "cbr-dlq-reason": "bad amount"}
    services.do_publish(dlq, [EventIn(b'{"n": 3}', headers={**origin, "cbr-dlq-offset": "3"})])
    page = browser_page
    page.on("dialog", lambda dialog: dialog.accept())
    url = live_server.url
    sign_in(page, url, "ada")

    # a search: a JSON condition, applied by the server
    page.goto(f"{url}/streams/shop/flows/events/")
    page.fill("input[name=json]", "$.amount>=150")
    page.click("button >> text=Show")
    page.wait_for_url("**json=**")
    assert "5 events of 20 examined" in page.locator(".pager").inner_text()
    shot(page, "search", (1280, 390))

    # its export, as a download
    with page.expect_download() as download:
        page.click("a >> text=JSON lines")
    lines = Path(download.value.path()).read_text().splitlines()
    assert [json.loads(json.loads(line)["payload"])["n"] for line in lines] == [15, 16, 17, 18, 19]

    # a dead letter republished to its stream, then marked
    page.goto(f"{url}/streams/shop/flows-dlq/events/")
    page.click("button >> text=Republish")
    page.wait_for_url("**/streams/shop/flows-dlq/events/")
    assert "1 dead letter(s) republished." in page.locator(".messages").inner_text()
    shot(page, "republished", (1280, 390))
    assert page.locator(".chip >> text=republished").count() == 1

    # a purge of everything held, after the name is typed
    page.goto(f"{url}/streams/shop/flows/")
    page.click("a >> text=Purge")
    shot(page, "purge", (1280, 390))
    page.fill("#confirm", "shop/flows")
    page.click("button >> text=Purge shop/flows")
    page.wait_for_url("**/streams/shop/flows/")
    assert "Purged shop/flows" in page.locator(".messages").inner_text()
    assert sum(logs.stream_log(stream).tail_cut().values()) - sum(logs.stream_log(stream).head_cut().values()) == 0


def test_a_groups_consumers_with_their_rates_and_deliveries_in_hand(live_server, admin_user, browser_page, data_dir):
    stream = services.do_create_stream(scope="shop", name="busy", segment_count=2)
    services.do_publish(stream, [EventIn(f"order {n}".encode(), routing_key=str(n).encode()) for n in range(200)])
    client = Client(live_server.url, username="ada", password="pw-ada-123")
    client.create_reader_group("shop/workers", ["shop/busy"], retention_type="NONE")
    group = client.reader_group("shop/workers")
    for n, name in enumerate(("worker-1", "worker-2", "worker-3")):
        got = group.read(max_events=40 + 10 * n, consumer=name)
        group.ack(got[: 30 - 10 * n], consumer=name)  # each keeps the rest in hand
    deadline = time.monotonic() + 10  # the web process adds its counts up every second
    while sum(c["acked"] for c in group.consumers()) < 60 and time.monotonic() < deadline:
        time.sleep(0.2)
    page = browser_page
    sign_in(page, live_server.url, "ada")
    page.goto(f"{live_server.url}/reader-groups/shop/workers/")
    table = page.locator("section:has(h2:text('Consumers')) table")
    rows = [[c.strip() for c in r.split("\t")] for r in table.inner_text().splitlines()[1:]]
    assert {r[0]: r[1] for r in rows} == {"worker-1": "10", "worker-2": "30", "worker-3": "50"}
    shot(page, "group-consumers", (1280, 390))


def test_an_operator_scales_a_stream_from_its_page_and_sees_the_key_space(
    live_server, admin_user, browser_page, data_dir
):
    stream = services.do_create_stream(scope="shop", name="growing", segment_count=2)
    services.do_publish(stream, [EventIn(f"order {n}".encode(), routing_key=str(n).encode()) for n in range(100)])
    page = browser_page
    sign_in(page, live_server.url, "ada")
    page.goto(f"{live_server.url}/streams/shop/growing/")
    panel = page.locator("#segments-panel")
    assert panel.locator("g.seg.active").count() == 2
    # split segment 0 into four, then merge two of its parts
    panel.locator("select[name=action]").select_option("split")
    panel.locator("select[name=segment]").select_option("0")
    panel.locator("input[name=parts]").fill("4")
    panel.locator("button:text('Scale')").click()
    page.wait_for_selector("text=Epoch 1: sealed 0, made 2, 3, 4, 5.")
    panel.locator("select[name=action]").select_option("merge")
    panel.locator("select[name=segment]").select_option("3")
    panel.locator("button:text('Scale')").click()
    page.wait_for_selector("text=Epoch 2: sealed 3, 4, made 6.")
    assert panel.locator("g.seg.active").count() == 4 and panel.locator("g.seg.sealed").count() == 3
    rows = panel.locator("table").first.inner_text()
    assert "sealed" in rows and "← 3, 4" in rows
    shot(page, "stream-segments", (1280, 390))
    # a refused scaling policy says why beside its field; a good one is saved, in place
    form = panel.locator("#scaling-policy form")
    form.locator("select[name=type]").select_option("by_event_rate")
    form.locator("input[name=target_rate]").fill("0")
    form.locator("input[name=min_segments]").fill("4")
    url_before = page.url
    form.locator("button:text('Save scaling policy')").click()
    page.wait_for_selector("#id_target_rate_errors")
    assert (
        "Target rate: must be a number of events/s per segment" in panel.locator("#id_target_rate_errors").inner_text()
    )
    assert Stream.objects.get(pk=stream.pk).scaling_policy == {}
    shot(page, "stream-scaling-policy-refused", (1280, 390))
    form.locator("input[name=target_rate]").fill("1500")
    form.locator("button:text('Save scaling policy')").click()
    page.wait_for_selector("text=Scaling policy saved")
    assert page.url == url_before  # swapped in place, no page load
    words = panel.locator("#scaling-policy dl").inner_text()
    assert "1,500 events/s per segment" in words and "Cool-down" in words
    assert Stream.objects.get(pk=stream.pk).scaling_policy == {
        "type": "by_event_rate",
        "target_rate": 1500.0,
        "scale_factor": 2,
        "min_segments": 4,
    }
    shot(page, "stream-scaling-policy", (1280, 800, 390))


def test_a_stream_page_says_what_is_in_long_term_storage_and_what_a_truncation_deleted_there(
    live_server, admin_user, browser_page, data_dir, settings, tmp_path
):
    settings.CBR_CHUNK_BYTES = 1024
    settings.CBR_TIER_URL = f"file://{tmp_path}/tier"
    tier_for.cache_clear()
    try:
        stream = services.do_create_stream(scope="shop", name="kept", segment_count=1)
        for n in range(20):
            services.do_publish(stream, [EventIn(f"order {n} ".encode() * 30)])
        tiering.do_offload(stream)
        retention_services.do_truncate(stream, {"0": 10}, rule="manual", trigger="api")
        page = browser_page
        sign_in(page, live_server.url, "ada")
        page.goto(f"{live_server.url}/streams/shop/kept/")
        card = page.locator(".card", has_text="On disk").inner_text()
        left = TierObject.objects.filter(stream=stream, kind="chunk").count()
        assert "long-term storage: " in card and f"in {left} chunk" in card
        history = page.locator("#history").locator("xpath=..").inner_text()
        assert "long-term: " in history
        shot(page, "stream-long-term-storage")

        settings.CBR_TIER_AFTER_S = 3600  # what a new chunk sealed now waits for
        for n in range(10):
            services.do_publish(stream, [EventIn(f"later {n} ".encode() * 30)])
        tiering.offload_due()
        page.goto(f"{live_server.url}/")
        row = page.locator("#health tr", has_text="Long-term storage").inner_text()
        assert "answers (file tier)" in row and "offload lag" in row and "of 1 stream waiting to be copied" in row
        shot(page, "dashboard-long-term-storage")
    finally:
        tier_for.cache_clear()


def test_a_groups_own_subscriber_timeout_on_its_page_and_in_the_streams_reasoning(
    live_server, admin_user, browser_page, data_dir
):
    policy = {"limit_type": "size", "min": 0, "consumption_based": True, "subscriber_timeout_s": 86400}
    client = Client(live_server.url, username="ada", password="pw-ada-123")
    client.create_stream("shop/orders", segment_count=1, retention_policy=policy)
    client.publish("shop/orders", [f"order {n}" for n in range(20)])
    client.create_reader_group(
        "shop/billing", ["shop/orders"], retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT", subscriber_timeout_s=7200
    )
    page = browser_page
    sign_in(page, live_server.url, "ada")
    page.goto(f"{live_server.url}/reader-groups/shop/billing/")
    timeout = page.locator("dt:text('Subscriber timeout') + dd").inner_text()
    assert timeout.startswith("2 h") and "wins over its streams' policies" in timeout, timeout
    shot(page, "group-subscriber-timeout", (1280, 390))
    page.goto(f"{live_server.url}/reader-groups/shop/billing/settings/")
    assert page.input_value("#id_subscriber_timeout_s") == "7200"
    shot(page, "group-settings-subscriber-timeout", (1280,))
    page.goto(f"{live_server.url}/streams/shop/orders/")
    reasoning = page.locator("section:has(h2:text('Next retention cycle'))").inner_text()
    assert "shop/billing (active; its group's own subscriber timeout, 2 h)" in reasoning, reasoning
    shot(page, "stream-next-cycle-group-timeout", (1280,))


def test_tags_set_in_the_console_show_on_pages_and_filter_the_lists(live_server, admin_user, browser_page, data_dir):
    client = Client(live_server.url, username="ada", password="pw-ada-123")
    client.create_stream("shop/orders", tags={"team": "payments", "env": "prod"})
    client.create_stream("shop/clicks", tags={"team": "web"}, publish_rate={"events_per_s": 500})
    client.create_reader_group("shop/billing", ["shop/orders"], tags={"team": "payments"})
    client.create_reader_group("shop/audit", ["shop/orders"])
    page = browser_page
    sign_in(page, live_server.url, "ada")
    page.goto(f"{live_server.url}/streams/?tag=team:payments")
    rows = page.locator("#stream-table tbody tr").all_inner_texts()
    assert len(rows) == 1 and "shop/orders" in rows[0] and "team=payments" in rows[0] and "env=prod" in rows[0]
    shot(page, "streams-by-tag", (1280, 390))
    page.goto(f"{live_server.url}/streams/?tag=Team:x")
    assert "Tag filter “Team:x”" in page.locator("#stream-table").inner_text()
    page.goto(f"{live_server.url}/streams/shop/clicks/settings/")
    page.fill("#id_tags", "team=web, tier=2")
    page.click("button.primary:text('Save')")
    page.wait_for_url(f"{live_server.url}/streams/shop/clicks/")
    assert "tier=2" in page.locator("dt:text('Tags') + dd").inner_text()
    assert Stream.objects.get(name="clicks").tags == {"team": "web", "tier": "2"}
    assert page.locator("dt:text('Publish rate') + dd").inner_text() == "500 events/s (over it: 429)"
    shot(page, "stream-tags", (1280,))
    page.goto(f"{live_server.url}/reader-groups/?tag=team")
    rows = page.locator("#group-table tbody tr").all_inner_texts()
    assert len(rows) == 1 and "shop/billing" in rows[0] and "team=payments" in rows[0]
    shot(page, "groups-by-tag", (1280,))
    page.goto(f"{live_server.url}/reader-groups/shop/audit/settings/")
    page.fill("#id_tags", "Bad Key=x")
    page.click("button.primary:text('Save')")
    assert "a tag's key is 1 to 63" in page.content()
    assert ReaderGroup.objects.get(name="audit").tags == {}


def test_a_groups_dispatch_rate_on_its_page_and_in_its_settings(live_server, admin_user, browser_page, data_dir):
    client = Client(live_server.url, username="ada", password="pw-ada-123")
    client.create_stream("shop/orders", segment_count=1)
    client.create_reader_group("shop/billing", ["shop/orders"], dispatch_rate={"events_per_s": 250})
    page = browser_page
    sign_in(page, live_server.url, "ada")
    page.goto(f"{live_server.url}/reader-groups/shop/billing/")
    shown = page.locator("dt:text('Dispatch rate') + dd").inner_text()
    assert shown == "250 events/s (its reads hand out no more)", shown
    shot(page, "group-dispatch-rate", (1280, 390))
    page.goto(f"{live_server.url}/reader-groups/shop/billing/settings/")
    assert page.input_value("#id_dispatch_events_per_s") == "250"
    shot(page, "group-settings-dispatch-rate", (1280,))
    page.fill("#id_dispatch_events_per_s", "")
    page.click("button:text('Save')")
    assert page.locator("dt:text('Dispatch rate') + dd").inner_text() == "no limit"


def test_a_streams_time_to_live_on_its_page_and_in_its_settings(live_server, admin_user, browser_page, data_dir):
    client = Client(live_server.url, username="ada", password="pw-ada-123")
    client.create_stream("shop/orders", segment_count=1, message_ttl_s=3600)
    page = browser_page
    sign_in(page, live_server.url, "ada")
    page.goto(f"{live_server.url}/streams/shop/orders/")
    shown = page.locator("dt:text('Time to live') + dd").inner_text()
    assert shown == "1 h (events without their own ttl_s; past it no group receives them)", shown
    shot(page, "stream-time-to-live", (1280, 390))
    page.goto(f"{live_server.url}/streams/shop/orders/settings/")
    assert page.input_value("#id_message_ttl_s") == "3600"
    page.fill("#id_message_ttl_s", "0")
    page.click("button:text('Save')")  # the browser holds it back (min 1): nothing sent
    assert page.url.endswith("/settings/") and page.locator("#id_message_ttl_s:invalid").count() == 1
    shot(page, "stream-settings-time-to-live", (1280,))
    assert Stream.objects.get(name="orders").message_ttl_s == 3600
    page.fill("#id_message_ttl_s", "")
    page.click("button:text('Save')")
    assert page.locator("dt:text('Time to live') + dd").inner_text() == "none (an event's own ttl_s still applies)"


def test_a_large_event_downloads_from_the_event_browser(live_server, admin_user, browser_page, data_dir, tmp_path):
    stream = services.do_create_stream(scope="shop", name="files", segment_count=1)
    services.do_publish(stream, [EventIn(b'{"small": true}')])
    body = os.urandom(3 * 1024 * 1024)
    token = factories.token_for(admin_user)
    Client(live_server.url, token=token).publish_large("shop/files", body, key="report")
    page = browser_page
    sign_in(page, live_server.url, "ada")
    page.goto(f"{live_server.url}/streams/shop/files/events/")
    page.wait_for_selector(".large-event a")
    shot(page, "events-large", (1280, 390))
    with page.expect_download() as download:
        page.click(".large-event a")
    saved = tmp_path / "got.bin"
    download.value.save_as(saved)
    assert saved.read_bytes() == body
    assert download.value.suggested_filename == "shop-files-0-1.bin"
