import factories
import pytest
from page_text import text

from ops import health
from retention.models import RetentionPolicy
from retention.services import do_truncate
from streams import logs, services

pytestmark = pytest.mark.django_db


@pytest.fixture
def streams_with_data():
    made = []
    for i, (scope, name) in enumerate([("shop", "orders"), ("shop", "returns"), ("iot", "telemetry")]):
        stream = factories.make_stream(name, scope=scope, segment_count=2)
        factories.publish(stream, 5 * (i + 1), b"x" * (10 * (i + 1)))
        logs.refresh_segments(stream)  # what the refresh-segment-stats beat task does
        made.append(stream)
    return made


def test_pages_need_a_login(client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_login_page_signs_a_user_in(client, admin_user):
    response = client.post("/login/", {"username": "ada", "password": "pw-ada-123"})
    assert response.status_code == 302
    assert "Dashboard" in client.get("/").content.decode()


def test_dashboard_shows_totals(admin_client, streams_with_data):
    html = admin_client.get("/").content.decode()
    # 5*10 + 10*20 + 15*30 = 700 bytes held in 30 events
    assert "700\xa0bytes" in html and ">30<" in html
    assert "iot/telemetry" in html


def test_stream_list_searches_sorts_and_paginates(admin_client, streams_with_data):
    html = admin_client.get("/streams/?q=ret").content.decode()
    assert "shop/returns" in html and "shop/orders" not in html
    html = admin_client.get("/streams/?sort=-size").content.decode()
    assert html.index("iot/telemetry") < html.index("shop/returns") < html.index("shop/orders")
    for i in range(25):
        services.do_create_stream(scope="many", name=f"s{i:02d}")
    page2 = admin_client.get("/streams/?page=2").content.decode()
    assert "page 2 of 2" in page2


def test_the_stream_table_is_sent_alone_to_htmx(admin_client, streams_with_data):
    fragment = admin_client.get("/streams/?q=orders", HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="stream-table">')
    assert "shop/orders" in fragment and "<html" not in fragment


def test_stream_page_shows_segments_policy_and_history(admin_client, streams_with_data):
    stream = streams_with_data[2]
    do_truncate(stream, {"0": 1, "1": 1}, rule="manual", trigger="console")
    html = admin_client.get("/streams/iot/telemetry/").content.decode()
    assert "Segments" in html and "Truncation history" in html
    assert "manual" in html and "No retention policy" in html


def test_the_policy_editor_saves_through_htmx(admin_client, streams_with_data):
    url = "/streams/shop/orders/policy/"
    form = admin_client.get(url + "?edit=1", HTTP_HX_REQUEST="true").content.decode()
    assert 'name="limit_type"' in form and "<html" not in form
    response = admin_client.post(
        url, {"limit_type": "size", "min": "1000", "max": "5000", "consumption_based": "on"}, HTTP_HX_REQUEST="true"
    )
    fragment = response.content.decode()
    assert "Policy saved" in fragment and 'id="policy-panel"' in fragment
    policy = RetentionPolicy.objects.get(stream__name="orders")
    assert (policy.limit_type, policy.min_value, policy.max_value, policy.consumption_based) == (
        "size",
        1000,
        5000,
        True,
    )


def test_the_policy_editor_shows_errors_beside_the_field(admin_client, streams_with_data):
    response = admin_client.post(
        "/streams/shop/orders/policy/", {"limit_type": "size", "min": "1000", "max": "10"}, HTTP_HX_REQUEST="true"
    )
    fragment = response.content.decode()
    assert "must be at least min (1000)" in fragment and "Save policy" in fragment
    assert not RetentionPolicy.objects.exists()


def test_a_viewer_cannot_edit_the_policy(client, plain_user, streams_with_data):
    client.force_login(plain_user)
    html = client.get("/streams/shop/orders/").content.decode()
    assert "?edit=1" not in html
    response = client.post("/streams/shop/orders/policy/", {"limit_type": "size", "min": "1"})
    assert response.status_code == 403 and not RetentionPolicy.objects.exists()


def test_dashboard_shows_health_from_the_heartbeats(admin_client):
    health.record_worker("console-test@h", ["celery"])
    try:
        page = text(admin_client.get("/").content.decode())
        assert "Health" in page and "Database answers" in page and "Redis answers" in page
        assert "console-test@h celery, seen" in page
        assert "free" in page.split("Data directory", 1)[1]
    finally:
        health.forget_worker("console-test@h")
    assert "console-test@h" not in text(admin_client.get("/").content.decode())
