"""A person in a browser: Playwright drives Debian's Chromium against a live server."""

import os
import shutil

import pytest
from django.db import connections
from playwright.sync_api import sync_playwright

from retention.models import RetentionPolicy
from streams import services

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def browser_page():
    if CHROMIUM is None:
        if os.environ.get("CBR_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium is not installed (CI installs Debian's package)")
        pytest.skip("chromium is not installed: apt-get install chromium")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        page = browser.new_page()
        yield page
        browser.close()
        # Queries made inside Playwright's context opened their own connection: close it, or the
        # test database cannot be dropped at the end of the run.
        connections.close_all()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def test_an_admin_logs_in_and_edits_a_policy(live_server, admin_user, browser_page):
    services.do_create_stream(scope="shop", name="orders", segment_count=2)
    page = browser_page
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", "pw-ada-123")
    page.click("button[type=submit]")
    page.wait_for_selector("text=Dashboard")
    page.goto(f"{live_server.url}/streams/shop/orders/")
    page.click("#policy-panel >> text=Edit")
    page.wait_for_selector("#policy-panel form")
    page.select_option("#id_limit_type", "time")
    page.fill("#id_min", "3600")
    page.fill("#id_max", "86400")
    page.check("#id_consumption_based")
    url_before = page.url
    page.click("text=Save policy")
    page.wait_for_selector("#policy-panel >> text=Policy saved")
    assert page.url == url_before  # swapped in place, no page load
    panel = page.inner_text("#policy-panel")
    assert "1 h" in panel and "1 d" in panel
    policy = RetentionPolicy.objects.get()
    assert (policy.limit_type, policy.min_value, policy.max_value) == ("time", 3600, 86400)
