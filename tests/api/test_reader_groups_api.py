from datetime import timedelta

import factories
import pytest
from django.utils import timezone

from domain.events import EventIn
from groups.models import ReaderGroup, Subscription
from retention.models import RetentionPolicy
from streams import logs, services
from streams.signals import holds_released

pytestmark = pytest.mark.django_db

URL = "/api/v1/reader-groups/"
CUT = URL + "shop/billing/truncation-cut/"


@pytest.fixture
def stream():
    stream = factories.make_stream(segment_count=2)
    services.do_publish(stream, [EventIn(b"x", routing_key=f"k{i}".encode()) for i in range(40)])
    return stream


def create(api, **body):
    body = {
        "scope": "shop",
        "name": "billing",
        "streams": ["shop/orders"],
        "retention_type": "MANUAL_RELEASE_AT_USER_STREAMCUT",
        **body,
    }
    return api.post(URL, body, format="json")


def test_a_subscriber_starts_at_its_start_position(api, stream):
    tail = logs.stream_log(stream).tail_cut()
    at_tail = create(api, start="tail").json()
    assert at_tail["generation"] == 0
    (entry,) = at_tail["streams"]
    assert entry["stream"] == "shop/orders" and entry["acknowledgement_cut"] == tail and entry["active"]
    at_head = create(api, name="audit").json()
    assert at_head["streams"][0]["acknowledgement_cut"] == {"0": 0, "1": 0}


@pytest.mark.parametrize(
    "body, status, field",
    [
        ({"streams": []}, 400, "streams"),
        ({"streams": ["shop/nope"]}, 404, "streams[0]"),
        ({"streams": ["nope"]}, 400, "streams[0]"),
        ({"streams": ["shop/orders", "shop/orders"]}, 400, "streams[1]"),
        ({"retention_type": "SOMETIMES"}, 400, "retention_type"),
        ({"start": "middle"}, 400, "start"),
        ({"ack_timeout_s": 0}, 400, "ack_timeout_s"),
        ({"max_deliveries": "5"}, 400, "max_deliveries"),
        ({"on_poison": "explode"}, 400, "on_poison"),
        ({"sinks": ["a", "a"]}, 400, "sinks"),
        ({"name": "bad name"}, 400, "name"),
        ({"colour": "red"}, 400, "colour"),
    ],
)
def test_bad_reader_group_bodies_name_the_field(api, stream, body, status, field):
    response = create(api, **body)
    assert response.status_code == status, response.content
    assert response.json()["field"] == field
    assert not ReaderGroup.objects.exists()


def test_a_duplicate_group_is_a_409(api, stream):
    create(api)
    assert create(api).status_code == 409


def test_viewers_create_no_reader_groups_and_operators_create_subscribers(user_api, operator_api, stream):
    response = create(user_api, retention_type="NONE")
    assert response.status_code == 403
    assert response.json() == {
        "code": "permission_denied",
        "message": "your role (viewer) may not manage reader groups",
    }
    assert not ReaderGroup.objects.exists()
    assert create(operator_api).status_code == 201
    assert ReaderGroup.objects.get().retention_type == "MANUAL_RELEASE_AT_USER_STREAMCUT"


def test_a_subscriber_publishes_its_acknowledgement_cut(api, stream):
    create(api)
    response = api.post(CUT, {"stream": "shop/orders", "stream_cut": {"0": 3, "1": 2}, "generation": 0}, format="json")
    assert response.status_code == 200
    assert response.json()["acknowledgement_cut"] == {"0": 3, "1": 2}
    detail = api.get(URL + "shop/billing/").json()
    assert detail["streams"][0]["acknowledgement_cut"] == {"0": 3, "1": 2}


@pytest.mark.parametrize(
    "body, status, code, field",
    [
        ({"stream": "shop/nope", "stream_cut": {"0": 1, "1": 1}}, 404, "stream_not_found", "stream"),
        ({"stream": "shop/other", "stream_cut": {"0": 1}}, 404, "subscriber_not_found", "stream"),
        (
            {"stream": "shop/orders", "stream_cut": {"0": 1, "1": 1}, "generation": 7},
            409,
            "generation_mismatch",
            "generation",
        ),
        ({"stream": "shop/orders", "stream_cut": {"0": 1}}, 400, "stream_cut_not_valid", "stream_cut"),
        (
            {"stream": "shop/orders", "stream_cut": {"0": 1, "1": 1, "5": 1}},
            400,
            "stream_cut_not_valid",
            "stream_cut.5",
        ),
        ({"stream": "shop/orders", "stream_cut": {"0": -1, "1": 1}}, 400, "stream_cut_not_valid", "stream_cut.0"),
        ({"stream": "shop/orders", "stream_cut": {"0": 1.5, "1": 1}}, 400, "stream_cut_not_valid", "stream_cut.0"),
        ({"stream": "shop/orders", "stream_cut": {"0": 1, "1": 999}}, 400, "stream_cut_not_valid", "stream_cut.1"),
        ({"stream": "shop/orders", "stream_cut": {"0": 1, "1": 1}}, 400, "stream_cut_behind_previous", "stream_cut.0"),
    ],
)
def test_a_bad_truncation_cut_gets_its_own_code_in_pravegas_order(api, stream, body, status, code, field):
    factories.make_stream("other")
    create(api)
    api.post(CUT, {"stream": "shop/orders", "stream_cut": {"0": 2, "1": 1}}, format="json")
    response = api.post(CUT, body, format="json")
    assert response.status_code == status, response.content
    assert (response.json()["code"], response.json()["field"]) == (code, field)
    assert Subscription.objects.get(stream=stream).acknowledgement_cut == {"0": 2, "1": 1}


def test_an_equal_truncation_cut_published_again_is_accepted_and_changes_nothing_but_liveness(api, stream):
    """Republishing the cut already published (a subscriber's periodic report with nothing new
    consumed): 200, the same cut and sizes, no hold released (no retention wake-up), and the
    subscriber counts as active again (its acknowledgement time moves)."""
    create(api)
    body = {"stream": "shop/orders", "stream_cut": {"0": 3, "1": 2}}
    assert api.post(CUT, body, format="json").status_code == 200
    before = Subscription.objects.get(stream=stream)
    Subscription.objects.update(acknowledged_at=timezone.now() - timedelta(seconds=30))
    released = []

    def heard(sender, streams, **kwargs):
        released.append(streams)

    holds_released.connect(heard)
    try:
        again = api.post(CUT, body, format="json")
    finally:
        holds_released.disconnect(heard)
    assert again.status_code == 200 and again.json()["acknowledgement_cut"] == {"0": 3, "1": 2}
    after = Subscription.objects.get(stream=stream)
    assert (after.acknowledgement_cut, after.acknowledgement_sizes) == (
        before.acknowledgement_cut,
        before.acknowledgement_sizes,
    )
    assert released == []
    assert after.acknowledged_at > timezone.now() - timedelta(seconds=5)


def test_a_plain_reader_cannot_publish_a_truncation_cut(api, stream):
    create(api, retention_type="NONE")
    response = api.post(CUT, {"stream": "shop/orders", "stream_cut": {"0": 1, "1": 1}}, format="json")
    assert response.status_code == 404 and response.json()["code"] == "subscriber_not_found"


def test_a_stale_subscriber_is_shown_inactive(api, stream):
    RetentionPolicy.objects.create(stream=stream, limit_type="size", consumption_based=True, subscriber_timeout_s=60)
    create(api)
    Subscription.objects.update(acknowledged_at=timezone.now() - timedelta(seconds=61))
    assert api.get(URL + "shop/billing/").json()["streams"][0]["active"] is False


def test_deleting_a_subscriber_releases_its_hold(api, user_api, stream):
    create(api)
    assert user_api.delete(URL + "shop/billing/").status_code == 403
    assert api.delete(URL + "shop/billing/").status_code == 204
    assert not Subscription.objects.exists()


@pytest.mark.parametrize("generation", ["0", True, 0.0, 1e30, [0]])
def test_a_truncation_cut_with_a_generation_that_is_not_an_integer_is_a_400(api, generation):
    # given a MANUAL subscriber at generation 0
    factories.make_stream("gen")
    api.post(
        "/api/v1/reader-groups/",
        {"scope": "shop", "name": "gen", "streams": ["shop/gen"], "retention_type": "MANUAL_RELEASE_AT_USER_STREAMCUT"},
        format="json",
    )
    # when it sends a generation of the wrong type
    response = api.post(
        "/api/v1/reader-groups/shop/gen/truncation-cut/",
        {"stream": "shop/gen", "stream_cut": {"0": 0}, "generation": generation},
        format="json",
    )
    # then it is invalid input naming the field, not a stale generation (nor a match, for true)
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "generation"


def test_a_truncation_cut_with_an_unknown_field_is_refused_naming_it(api):
    # a typo such as `generaton` must not publish the cut without the generation check
    factories.make_stream("typo")
    api.post(
        "/api/v1/reader-groups/",
        {
            "scope": "shop",
            "name": "typo",
            "streams": ["shop/typo"],
            "retention_type": "MANUAL_RELEASE_AT_USER_STREAMCUT",
        },
        format="json",
    )
    response = api.post(
        "/api/v1/reader-groups/shop/typo/truncation-cut/",
        {"stream": "shop/typo", "stream_cut": {"0": 0}, "generaton": 3},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "generaton"


def test_the_list_gives_each_groups_lag_when_asked(api, stream):
    create(api, retention_type="NONE")
    read = api.post(URL + "shop/billing/read/", {"max_events": 15}, format="json").json()
    assert len(read["deliveries"]) == 15
    plain = api.get(URL).json()["results"][0]
    assert "lag_events" not in plain  # as before, unless asked: it costs a round trip a group
    (row,) = api.get(URL + "?lag=true").json()["results"]
    assert (row["name"], row["lag_events"], row["pending"]) == ("billing", 40, 15)
    refused = api.get(URL + "?lag=yes")
    assert refused.status_code == 400 and refused.json()["field"] == "lag"


def test_a_group_sets_its_own_subscriber_timeout_and_it_decides_whether_it_is_active(api, stream):
    RetentionPolicy.objects.create(stream=stream, limit_type="size", consumption_based=True, subscriber_timeout_s=86400)
    created = create(api, subscriber_timeout_s=60)
    assert created.status_code == 201 and created.json()["subscriber_timeout_s"] == 60
    Subscription.objects.update(acknowledged_at=timezone.now() - timedelta(seconds=61))
    assert api.get(URL + "shop/billing/").json()["streams"][0]["active"] is False  # its own 60 s, not the day
    changed = api.patch(URL + "shop/billing/", {"subscriber_timeout_s": None}, format="json")
    assert changed.status_code == 200 and changed.json()["subscriber_timeout_s"] is None
    assert api.get(URL + "shop/billing/").json()["streams"][0]["active"] is True  # the policy's day again
    assert create(api, name="plain").json()["subscriber_timeout_s"] is None  # unset: its streams' policies


@pytest.mark.parametrize("value", [-1, 1.5, "60", True, 2**31])
def test_a_bad_subscriber_timeout_is_refused_naming_the_field_and_changes_nothing(api, stream, value):
    refused = create(api, subscriber_timeout_s=value)
    assert refused.status_code == 400 and refused.json()["field"] == "subscriber_timeout_s"
    assert not ReaderGroup.objects.exists()
    create(api, subscriber_timeout_s=60)
    patched = api.patch(URL + "shop/billing/", {"subscriber_timeout_s": value}, format="json")
    assert patched.status_code == 400 and patched.json()["field"] == "subscriber_timeout_s"
    assert ReaderGroup.objects.get().subscriber_timeout_s == 60
