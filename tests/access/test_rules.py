"""The access rules as plain Python: roles, scoped keys, the strongest of several roles."""

import pytest

from access.rules import Action, KeyKind, KeyScope, Principal, Role, Target, TargetKind, decide, strongest

ORDERS = Target(TargetKind.STREAM, "shop/orders")
BILLING = Target(TargetKind.READER_GROUP, "shop/billing")


@pytest.mark.parametrize("action", list(Action))
def test_an_admin_may_do_everything(action):
    assert decide(Principal(role=Role.ADMIN), action, ORDERS).allowed


def test_an_operator_may_do_everything_but_truncate_by_hand_and_delete_streams():
    allowed = {a for a in Action if decide(Principal(role=Role.OPERATOR), a, ORDERS).allowed}
    assert allowed == set(Action) - {Action.TRUNCATE, Action.DELETE_STREAM}


def test_a_viewer_only_views_and_is_told_why():
    allowed = {a for a in Action if decide(Principal(role=Role.VIEWER), a, ORDERS).allowed}
    assert allowed == {Action.VIEW}
    assert decide(Principal(role=Role.VIEWER), Action.PUBLISH, ORDERS).reason == "your role (viewer) may not publish"


def test_nobody_without_a_role_or_key_may_do_anything():
    assert not any(decide(Principal(), a, ORDERS).allowed for a in Action)


def test_a_reader_group_key_consumes_and_views_its_group_only():
    key = Principal(key=KeyScope(KeyKind.READER_GROUP, frozenset({"shop/billing"})))
    assert decide(key, Action.CONSUME, BILLING).allowed
    assert decide(key, Action.VIEW, BILLING).allowed
    assert not decide(key, Action.CONSUME, Target(TargetKind.READER_GROUP, "shop/audit")).allowed
    assert not decide(key, Action.VIEW, None).allowed  # lists are not its business
    assert not decide(key, Action.MANAGE_READER_GROUPS, BILLING).allowed
    # a stream of the same name is not the group
    assert not decide(key, Action.VIEW, Target(TargetKind.STREAM, "shop/billing")).allowed


def test_a_publish_key_publishes_on_its_streams_only():
    key = Principal(key=KeyScope(KeyKind.PUBLISH, frozenset({"shop/orders", "shop/refunds"})))
    assert decide(key, Action.PUBLISH, ORDERS).allowed
    assert decide(key, Action.PUBLISH, Target(TargetKind.STREAM, "shop/refunds")).allowed
    refused = decide(key, Action.PUBLISH, Target(TargetKind.STREAM, "shop/payments"))
    assert not refused.allowed
    assert refused.reason == "this API key is for the streams shop/orders, shop/refunds only"
    assert not decide(key, Action.VIEW, ORDERS).allowed  # reading the stream is not publishing


def test_a_key_never_gains_a_role():
    key = Principal(role=Role.ADMIN, key=KeyScope(KeyKind.PUBLISH, frozenset({"shop/orders"})))
    assert not decide(key, Action.TRUNCATE, ORDERS).allowed


def test_the_strongest_role_wins_whatever_the_order():
    assert strongest(iter([Role.VIEWER, Role.OPERATOR])) == Role.OPERATOR
    assert strongest(r for r in [Role.OPERATOR, Role.ADMIN]) == Role.ADMIN
    assert strongest([]) is None
