"""The shared test factories (tests/factories.py) make what their names say: the tests that use
them rely on it."""

from datetime import timedelta

import factories
import pytest
from django.utils import timezone

from access.principals import role_of
from access.rules import Role
from groups.models import Subscription
from retention.models import RetentionPolicy

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("role", factories.ROLES)
def test_a_user_made_in_a_role_has_that_role(role):
    user = factories.make_user(f"u-{role}", role)
    assert role_of(user) == Role(role)
    assert user.check_password(f"pw-u-{role}-123")


def test_an_unknown_role_is_refused():
    with pytest.raises(ValueError, match="superhero"):
        factories.make_user("x", "superhero")


def test_a_stream_gets_its_settings_and_a_policy_only_when_given_one():
    plain = factories.make_stream()
    assert (plain.scope.name, plain.name, plain.segment_count) == ("shop", "orders", 1)
    assert not RetentionPolicy.objects.filter(stream=plain).exists()
    kept = factories.make_stream(
        "kept",
        scope="iot",
        segment_count=3,
        on_max_limit="reject_publish",
        policy={"limit_type": "size", "min": 90, "max": 180},
    )
    assert (kept.scope.name, kept.segment_count, kept.on_max_limit) == ("iot", 3, "reject_publish")
    policy = RetentionPolicy.objects.get(stream=kept)
    assert (policy.limit_type, policy.min_value, policy.max_value) == ("size", 90, 180)


def test_publish_appends_count_events_and_a_group_subscribes_to_its_streams():
    orders, refunds = factories.make_stream(), factories.make_stream("refunds")
    positions = factories.publish(orders, 4, b"x" * 30)
    assert [(p.segment, p.offset) for p in positions] == [("0", i) for i in range(4)]
    group = factories.make_group(orders, refunds)
    assert (group.scope.name, group.name, group.retention_type) == ("shop", "billing", "NONE")
    assert {s.stream_id for s in Subscription.objects.filter(reader_group=group)} == {orders.pk, refunds.pk}


def test_subscribe_sets_a_manual_groups_cut_and_called_again_moves_it():
    stream = factories.make_stream()
    first = factories.subscribe(stream, "A", {"0": 3})
    assert (first.reader_group.scope, first.reader_group.retention_type) == (
        stream.scope,
        "MANUAL_RELEASE_AT_USER_STREAMCUT",
    )
    assert first.acknowledgement_cut == {"0": 3} and first.acknowledged_at is not None
    at = timezone.now() - timedelta(minutes=10)
    again = factories.subscribe(stream, "A", {"0": 5}, acknowledged_at=at)
    assert again.pk == first.pk and (again.acknowledgement_cut, again.acknowledged_at) == ({"0": 5}, at)
    assert Subscription.objects.filter(stream=stream).count() == 1


def test_the_api_factories_make_what_they_are_asked_and_check_the_answer(api):
    stream = factories.create_stream_over_api(api, segment_count=2)
    assert stream.segment_count == 2
    answer = factories.publish_over_api(api, [{"payload": "a"}, {"payload": "b"}])
    assert len(answer["positions"]) == 2
    group = factories.create_group_over_api(api, retention_type="NONE")
    assert group["name"] == "billing" and [s["stream"] for s in group["streams"]] == ["shop/orders"]
    with pytest.raises(AssertionError):
        factories.create_stream_over_api(api)  # a duplicate: 409, not 201
