"""A scope's defaults (docs/api.md; Pulsar's namespace policies, Pravega's scope-wide
settings): streams that set none of their own inherit the scope's retention policy and compaction
settings, follow them as they change, go back to the built-in defaults when they are removed, and
stop following a setting once they set it themselves; the retention cycle applies an inherited
policy like any other."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import factories
import pytest
from django.core.management import call_command

from retention.models import RetentionPolicy
from streams.models import Stream

pytestmark = pytest.mark.django_db
D = "/api/v1/scopes/shop/defaults/"
WEEK = {"limit_type": "time", "min": 604800, "consumption_based": True}


def stream(api, name: str) -> dict:
    answer = api.get(f"/api/v1/streams/shop/{name}/")
    assert answer.status_code == 200, answer.content
    return answer.json()


def put(api, body, expect=200):
    answer = api.put(D, body, format="json")
    assert answer.status_code == expect, answer.content
    return answer.json()


def test_streams_that_set_nothing_inherit_the_scopes_defaults(api):
    # given defaults set before the scope has a stream
    got = put(api, {"retention_policy": WEEK, "cleanup_policy": "compact,delete", "compacted_retention_s": 3600})
    assert got == {
        "scope": "shop",
        "retention_policy": WEEK,
        "cleanup_policy": "compact,delete",
        "min_compaction_lag_s": None,
        "delete_retention_s": None,
        "compacted_retention_s": 3600,
        "compacted_retention_bytes": None,
    }
    assert api.get(D).json() == got
    # when a stream sets nothing and another sets its own policy and cleanup
    factories.create_stream_over_api(api, "plain")
    factories.create_stream_over_api(
        api, "own", retention_policy={"limit_type": "size", "min": 10}, cleanup_policy="delete"
    )
    # then the first inherits, shown as inherited; the second keeps its own
    plain = stream(api, "plain")
    assert plain["retention_policy"]["inherited_from"] == "scope"
    assert (plain["retention_policy"]["limit_type"], plain["retention_policy"]["min"]) == ("time", 604800)
    assert (plain["cleanup_policy"], plain["compacted_retention_s"], plain["delete_retention_s"]) == (
        "compact,delete",
        3600,
        86400,
    )
    assert plain["inherited_from_scope"] == ["retention_policy", "cleanup_policy", "compacted_retention_s"]
    own = stream(api, "own")
    assert "inherited_from" not in own["retention_policy"] and own["retention_policy"]["limit_type"] == "size"
    assert own["cleanup_policy"] == "delete" and own["inherited_from_scope"] == ["compacted_retention_s"]


def test_a_change_of_the_defaults_reaches_the_streams_that_inherit_and_no_other(api):
    put(api, {"retention_policy": WEEK, "delete_retention_s": 100})
    factories.create_stream_over_api(api, "plain")
    factories.create_stream_over_api(api, "own", retention_policy={"limit_type": "size", "min": 10})

    put(api, {"retention_policy": {"limit_type": "size", "min": 99}, "delete_retention_s": 200})

    plain, own = stream(api, "plain"), stream(api, "own")
    assert (plain["retention_policy"]["limit_type"], plain["retention_policy"]["min"]) == ("size", 99)
    assert plain["delete_retention_s"] == 200 and own["delete_retention_s"] == 200
    assert own["retention_policy"]["min"] == 10


def test_a_stream_that_sets_a_setting_itself_stops_following_the_scope(api):
    put(api, {"retention_policy": WEEK, "cleanup_policy": "compact"})
    factories.create_stream_over_api(api, "plain")
    assert api.patch("/api/v1/streams/shop/plain/", {"cleanup_policy": "delete"}, format="json").status_code == 200
    own = api.put("/api/v1/streams/shop/plain/retention-policy/", {"limit_type": "size", "min": 5}, format="json")
    assert own.status_code == 200

    put(api, {"retention_policy": {"limit_type": "size", "min": 1000}, "cleanup_policy": "compact,delete"})

    plain = stream(api, "plain")
    assert plain["cleanup_policy"] == "delete" and plain["retention_policy"]["min"] == 5
    assert plain["inherited_from_scope"] == [] and "inherited_from" not in plain["retention_policy"]


def test_removing_the_defaults_takes_inheriting_streams_back_to_the_built_in_ones(api):
    put(api, {"retention_policy": WEEK, "cleanup_policy": "compact", "min_compaction_lag_s": 60})
    factories.create_stream_over_api(api, "plain")
    assert api.delete(D).status_code == 204
    plain = stream(api, "plain")
    assert plain["retention_policy"] is None and plain["inherited_from_scope"] == []
    assert (plain["cleanup_policy"], plain["min_compaction_lag_s"]) == ("delete", 0)
    assert api.get(D).json()["retention_policy"] is None
    # new defaults reach it again: it still sets nothing of its own
    put(api, {"retention_policy": WEEK})
    assert stream(api, "plain")["retention_policy"]["inherited_from"] == "scope"


def test_an_existing_stream_without_a_policy_takes_the_scopes_new_default(api):
    factories.create_stream_over_api(api, "older")
    assert stream(api, "older")["retention_policy"] is None
    put(api, {"retention_policy": WEEK})
    assert stream(api, "older")["retention_policy"]["inherited_from"] == "scope"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"colour": "red"}, "colour"),
        ({"retention_policy": {"limit_type": "time", "min": -1}}, "retention_policy.min"),
        ({"retention_policy": {"limit_type": "time", "mins": 1}}, "retention_policy.mins"),
        ({"retention_policy": "a week"}, "retention_policy"),
        ({"cleanup_policy": "squash"}, "cleanup_policy"),
        ({"delete_retention_s": -5}, "delete_retention_s"),
        ({"compacted_retention_bytes": True}, "compacted_retention_bytes"),
        ({"min_compaction_lag_s": "60"}, "min_compaction_lag_s"),
        ([{"cleanup_policy": "compact"}], "body"),
    ],
)
def test_bad_defaults_are_refused_naming_the_field_and_change_nothing(api, body, field):
    put(api, {"delete_retention_s": 100})
    factories.create_stream_over_api(api, "plain")
    answer = api.put(D, body, format="json")
    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == field
    assert api.get(D).json()["delete_retention_s"] == 100 and stream(api, "plain")["delete_retention_s"] == 100


def test_viewers_read_the_defaults_and_only_operators_change_them(api, user_api, operator_api):
    put(api, {"cleanup_policy": "compact"})
    assert user_api.get(D).json()["cleanup_policy"] == "compact"
    assert user_api.put(D, {"cleanup_policy": "delete"}, format="json").status_code == 403
    assert user_api.delete(D).status_code == 403
    assert operator_api.put(D, {"cleanup_policy": "delete"}, format="json").status_code == 200
    assert api.get("/api/v1/scopes/nowhere/defaults/").status_code == 404


def test_the_retention_cycle_applies_an_inherited_policy(api, settings):
    settings.CBR_RETENTION_INTERVAL = 60
    put(api, {"retention_policy": {"limit_type": "size", "min": 2}})
    made = factories.create_stream_over_api(api, "plain")
    factories.publish_over_api(api, [{"payload": "x"}] * 5, stream="shop/plain")
    at = datetime.now(UTC) - timedelta(minutes=10)
    call_command("run_retention_cycle", "--stream", "shop/plain", "--now", at.isoformat(), stdout=StringIO())
    factories.publish_over_api(api, [{"payload": "x"}] * 5, stream="shop/plain")
    out = StringIO()
    call_command("run_retention_cycle", "--stream", "shop/plain", "--now", datetime.now(UTC).isoformat(), stdout=out)
    assert "(size:limit_min)" in out.getvalue()
    assert stream(api, "plain")["head_cut"] == {"0": 5}
    assert RetentionPolicy.objects.get(stream=made).min_value == 2
    assert Stream.objects.get(pk=made.pk).inherited[0] == "retention_policy"
