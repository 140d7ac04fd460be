"""The console tests' browser: Playwright driving Debian's Chromium (CI installs it; without it,
a local run skips the browser tests, and CI, with CBR_REQUIRE_BROWSER=1, fails them)."""

import os
import shutil

import pytest
from django.db import connections
from playwright.sync_api import sync_playwright

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
