"""Creating, changing and deleting streams and reader groups in the console, as the roles allow:
a refusal of the domain beside the field it names, nothing made by a refused form, deletion only
after the name is typed."""

import re

import factories
import pytest
from page_text import text

from groups.models import ReaderGroup
from streams.models import Stream

pytestmark = pytest.mark.django_db

POLICY = {"limit_type": "size", "min": "1000", "max": "50000", "consumption_based": "on"}


@pytest.fixture
def operator(operator_user):
    return factories.console_client(operator_user)  # a client of its own: admin_client shares `client`


def new_stream(console, **fields):
    body = {"scope": "shop", "name": "orders", "segment_count": "2", "on_max_limit": "truncate", **POLICY, **fields}
    return console.post("/streams/new/", body)


def errors_beside(html: str) -> list[str]:
    return [text(e) for e in re.findall(r'<ul class="errorlist">(.*?)</ul>', html, re.S)]


def test_an_operator_creates_a_stream_with_its_policy(operator, data_dir):
    answer = new_stream(operator)
    assert answer.status_code == 302 and answer["Location"] == "/streams/shop/orders/"
    stream = Stream.objects.get(scope__name="shop", name="orders")
    assert stream.segment_count == 2
    policy = stream.retention_policy
    assert (policy.limit_type, policy.min_value, policy.max_value, policy.consumption_based) == (
        "size",
        1000,
        50000,
        True,
    )
    page = text(operator.get(answer["Location"]).content.decode())
    assert "Stream shop/orders created." in page


def test_refusals_show_beside_their_field_and_make_nothing(operator, data_dir):
    answer = new_stream(operator, name="bad name!")
    assert answer.status_code == 200 and "must be 1 to 128 characters" in " ".join(
        errors_beside(answer.content.decode())
    )
    answer = new_stream(operator, min="60000")  # min above max: parse_policy's refusal
    assert answer.status_code == 200 and errors_beside(answer.content.decode()) == ["must be at least min (60000)"]
    assert not Stream.objects.exists()
    assert new_stream(operator).status_code == 302
    again = new_stream(operator)
    assert again.status_code == 200 and any("exists" in e for e in errors_beside(again.content.decode()))
    assert Stream.objects.count() == 1


def test_a_viewer_may_not_create_change_or_delete(client, plain_user, data_dir):
    viewer = factories.console_client(plain_user, client)
    factories.make_stream("orders")
    for url in (
        "/streams/new/",
        "/streams/shop/orders/settings/",
        "/streams/shop/orders/delete/",
        "/reader-groups/new/",
    ):
        assert viewer.get(url).status_code == 403, url
    assert new_stream(viewer, name="other").status_code == 403
    page = viewer.get("/streams/").content.decode()
    assert "New stream" not in page


def test_settings_change_only_what_was_changed(operator, data_dir):
    assert new_stream(operator, cleanup_policy="").status_code == 302
    stream = Stream.objects.get(name="orders")
    answer = operator.post(
        "/streams/shop/orders/settings/",
        {
            "description": "orders of the shop",
            "cleanup_policy": stream.cleanup_policy,
            "on_max_limit": "reject_publish",
        },
    )
    assert answer.status_code == 302
    stream.refresh_from_db()
    assert (stream.description, stream.on_max_limit) == ("orders of the shop", "reject_publish")
    assert "cleanup_policy" in stream.inherited  # untouched: still the scope's


def test_only_an_admin_deletes_a_stream_and_only_once_its_name_is_typed(operator, admin_client, data_dir):
    factories.make_stream("orders")
    assert operator.post("/streams/shop/orders/delete/", {"confirm": "shop/orders"}).status_code == 403
    page = text(admin_client.get("/streams/shop/orders/delete/").content.decode())
    assert "Delete stream shop/orders?" in page and "This cannot be undone" in page
    refused = admin_client.post("/streams/shop/orders/delete/", {"confirm": "orders"})
    assert refused.status_code == 200 and Stream.objects.filter(name="orders").exists()
    assert "dead letters" not in page  # none yet
    done = admin_client.post("/streams/shop/orders/delete/", {"confirm": "shop/orders"})
    assert done.status_code == 302 and not Stream.objects.filter(name="orders").exists()


def test_deleting_a_stream_says_its_dead_letter_stream_stays(admin_client, data_dir):
    factories.make_stream("orders")
    factories.make_stream("orders-dlq")
    page = text(admin_client.get("/streams/shop/orders/delete/").content.decode())
    assert "Its dead letters, stream shop/orders-dlq, stay: delete it on its own page" in page
    admin_client.post("/streams/shop/orders/delete/", {"confirm": "shop/orders"})
    assert Stream.objects.filter(name="orders-dlq").exists()


def group_body(**fields):
    return {
        "scope": "shop",
        "name": "billing",
        "streams": ["shop/orders"],
        "retention_type": "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT",
        "start": "head",
        "ack_timeout_s": "45",
        "max_deliveries": "3",
        "on_poison": "dead_letter",
        "ack_policy": "explicit",
        "backoff_s": "1, 5",
        "max_ack_pending": "1000",
        **fields,
    }


def test_an_operator_creates_changes_and_deletes_a_reader_group(operator, data_dir):
    factories.make_stream("orders")
    refused = operator.post("/reader-groups/new/", group_body(max_deliveries="1"))  # two waits, one redelivery
    assert refused.status_code == 200 and errors_beside(refused.content.decode())
    refused = operator.post("/reader-groups/new/", group_body(start="time"))
    assert refused.status_code == 200 and "give the time to start from" in errors_beside(refused.content.decode())
    assert not ReaderGroup.objects.exists()

    made = operator.post("/reader-groups/new/", group_body())
    assert made.status_code == 302, (
        errors_beside(made.content.decode()) and made["Location"] == "/reader-groups/shop/billing/"
    )
    group = ReaderGroup.objects.get(name="billing")
    assert (group.ack_timeout_s, group.max_deliveries, group.backoff_s) == (45, 3, [1, 5])
    assert [s.stream.full_name for s in group.subscription_set.all()] == ["shop/orders"]

    changed = operator.post(
        "/reader-groups/shop/billing/settings/",
        {k: v for k, v in group_body(ack_timeout_s="60", backoff_s="").items() if k not in ("scope", "name", "start")},
    )
    assert changed.status_code == 302, errors_beside(changed.content.decode())
    group.refresh_from_db()
    assert (group.ack_timeout_s, group.backoff_s, group.generation) == (60, [], 1)

    assert "Its hold on retention ends" in text(operator.get("/reader-groups/shop/billing/delete/").content.decode())
    assert operator.post("/reader-groups/shop/billing/delete/", {"confirm": "shop/billing"}).status_code == 302
    assert not ReaderGroup.objects.exists()


def test_a_fan_out_group_with_its_pending_limit_and_sinks(operator, data_dir):
    factories.make_stream("orders")
    refused = operator.post("/reader-groups/new/", group_body(sinks="search, search"))
    assert refused.status_code == 200 and errors_beside(refused.content.decode()) == ["sink names must be distinct"]
    made = operator.post(
        "/reader-groups/new/", group_body(sinks="search, archive", max_ack_pending="50", read_compacted="on")
    )
    assert made.status_code == 302, errors_beside(made.content.decode())
    group = ReaderGroup.objects.get(name="billing")
    assert (group.sink_names, group.max_ack_pending, group.read_compacted) == (("archive", "search"), 50, True)
    form = operator.get("/reader-groups/shop/billing/settings/").content.decode()
    assert 'value="archive, search"' in form and 'value="50"' in form


def test_a_group_made_from_a_consumption_based_streams_page_starts_as_a_subscriber_and_says_so(operator, data_dir):
    new_stream(operator)  # consumption-based
    new_stream(operator, name="audit", consumption_based="")  # not
    stream_page = operator.get("/streams/shop/orders/").content.decode()
    link = re.search(r'href="(/reader-groups/new/\?[^"]+)"', stream_page).group(1).replace("&amp;", "&")

    form = operator.get(link).content.decode()
    selected = re.search(r'<select name="retention_type"[^>]*>(.*?)</select>', form, re.S).group(1)
    assert re.search(r'<option value="AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT" selected>', selected)
    assert "shop/orders is consumption-based: this group starts as a subscriber (AUTOMATIC)" in text(form)

    # from a stream that is not consumption-based (or from the groups page): a plain reader, no word
    plain = operator.get("/reader-groups/new/?stream=shop/audit&scope=shop").content.decode()
    retention = re.search(r'<select name="retention_type"[^>]*>(.*?)</select>', plain, re.S).group(1)
    assert "selected" not in retention  # the first, NONE, as the API's default
    assert "consumption-based:" not in text(plain)
    assert "consumption-based:" not in text(operator.get("/reader-groups/new/").content.decode())


def test_policy_limits_may_be_written_with_their_units(operator, data_dir):
    # a size limit in decimal and binary units, a time limit in days, a subscriber timeout in hours
    assert new_stream(operator, min="1KB", max="2GiB").status_code == 302
    sized = Stream.objects.get(name="orders").retention_policy
    assert (sized.min_value, sized.max_value) == (1000, 2 * 1024**3)
    timed = new_stream(operator, name="audit", limit_type="time", min="7d", max="", subscriber_timeout_s="12h")
    assert timed.status_code == 302
    policy = Stream.objects.get(name="audit").retention_policy
    assert (policy.min_value, policy.subscriber_timeout_s) == (604_800, 43_200)

    # a unit of the other kind, or none that exists, is refused beside its field; nothing is made
    wrong = new_stream(operator, name="mixed", limit_type="time", min="50GB", max="")
    assert wrong.status_code == 200
    assert errors_beside(wrong.content.decode()) == ["written as a size, but the limits are time"]
    unknown = new_stream(operator, name="typo", max="5XB")
    assert "is not a size or a duration" in " ".join(errors_beside(unknown.content.decode()))
    timeout = new_stream(operator, name="late", subscriber_timeout_s="2GB")
    assert errors_beside(timeout.content.decode()) == ["'2GB' is not a duration (s, m, h, d, w)"]
    assert not Stream.objects.filter(name__in=["mixed", "typo", "late"]).exists()


def test_a_subscribers_own_timeout_is_set_changed_and_cleared_from_the_console(operator, data_dir):
    factories.make_stream("orders")
    refused = operator.post("/reader-groups/new/", group_body(subscriber_timeout_s="-5"))
    assert refused.status_code == 200 and errors_beside(refused.content.decode())
    assert not ReaderGroup.objects.exists()
    made = operator.post("/reader-groups/new/", group_body(subscriber_timeout_s="600"))
    assert made.status_code == 302, errors_beside(made.content.decode())
    assert ReaderGroup.objects.get().subscriber_timeout_s == 600
    assert 'value="600"' in operator.get("/reader-groups/shop/billing/settings/").content.decode()
    body = {k: v for k, v in group_body(subscriber_timeout_s="").items() if k not in ("scope", "name", "start")}
    assert operator.post("/reader-groups/shop/billing/settings/", body).status_code == 302
    assert ReaderGroup.objects.get().subscriber_timeout_s is None  # blank: each stream's policy again


def test_a_streams_publish_rate_is_set_and_cleared_in_its_settings_and_shown(operator, data_dir):
    stream = factories.make_stream("orders")
    body = {"description": "", "cleanup_policy": "delete", "on_max_limit": "truncate"}
    refused = operator.post("/streams/shop/orders/settings/", {**body, "events_per_s": "0"})
    assert refused.status_code == 200 and errors_beside(refused.content.decode())
    saved = operator.post("/streams/shop/orders/settings/", {**body, "events_per_s": "250", "bytes_per_s": "1048576"})
    assert saved.status_code == 302, errors_beside(saved.content.decode())
    stream.refresh_from_db()
    assert stream.publish_rate == {"events_per_s": 250.0, "bytes_per_s": 1048576.0}
    page = text(operator.get("/streams/shop/orders/").content.decode())
    assert "Publish rate 250 events/s · 1.0 MiB/s (over it: 429)" in page, page
    assert operator.post("/streams/shop/orders/settings/", body).status_code == 302
    stream.refresh_from_db()
    assert stream.publish_rate == {}


def test_a_streams_time_to_live_is_set_shown_and_cleared_in_its_settings(operator, data_dir):
    stream = factories.make_stream("orders")
    body = {"description": "", "cleanup_policy": "delete", "on_max_limit": "truncate"}
    refused = operator.post("/streams/shop/orders/settings/", {**body, "message_ttl_s": "0"})
    assert refused.status_code == 200 and errors_beside(refused.content.decode())
    stream.refresh_from_db()
    assert stream.message_ttl_s is None  # nothing saved
    saved = operator.post("/streams/shop/orders/settings/", {**body, "message_ttl_s": "3600"})
    assert saved.status_code == 302, errors_beside(saved.content.decode())
    stream.refresh_from_db()
    assert stream.message_ttl_s == 3600
    page = text(operator.get("/streams/shop/orders/").content.decode())
    assert "Time to live 1 h (events without their own ttl_s; past it no group receives them)" in page, page
    assert operator.post("/streams/shop/orders/settings/", body).status_code == 302
    stream.refresh_from_db()
    assert stream.message_ttl_s is None
    assert "Time to live none" in text(operator.get("/streams/shop/orders/").content.decode())


def test_a_groups_dispatch_rate_is_set_shown_and_cleared_from_the_console(operator, data_dir):
    factories.make_stream("orders")
    refused = operator.post("/reader-groups/new/", group_body(dispatch_events_per_s="0"))
    assert refused.status_code == 200 and errors_beside(refused.content.decode())
    assert not ReaderGroup.objects.exists()
    made = operator.post("/reader-groups/new/", group_body(dispatch_events_per_s="12.5"))
    assert made.status_code == 302, errors_beside(made.content.decode())
    assert ReaderGroup.objects.get().dispatch_rate == {"events_per_s": 12.5}
    page = text(operator.get("/reader-groups/shop/billing/").content.decode())
    assert "Dispatch rate 12.5 events/s (its reads hand out no more)" in page, page
    assert 'value="12.5"' in operator.get("/reader-groups/shop/billing/settings/").content.decode()

    def editing(**fields):
        return {k: v for k, v in group_body(**fields).items() if k not in ("scope", "name", "start")}

    assert (
        operator.post("/reader-groups/shop/billing/settings/", editing(dispatch_events_per_s="40")).status_code == 302
    )
    assert 'value="40"' in operator.get("/reader-groups/shop/billing/settings/").content.decode()  # not 40.0
    body = editing(dispatch_events_per_s="")
    assert operator.post("/reader-groups/shop/billing/settings/", body).status_code == 302
    assert ReaderGroup.objects.get().dispatch_rate == {}
    assert "Dispatch rate no limit" in text(operator.get("/reader-groups/shop/billing/").content.decode())
