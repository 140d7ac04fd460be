"""A person in a browser: Playwright drives Debian's Chromium against a live server."""

import pytest

from retention.models import RetentionPolicy
from streams import services

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


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
