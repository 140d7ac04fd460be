"""Pravega's updateTruncationStreamCut takes a map of streams: `stream_cuts` publishes a group's
cuts of several streams in one call, every cut checked first, all applied or none, a refusal
naming the first failing stream with its own code."""

import factories
import pytest

from groups.models import Subscription

pytestmark = pytest.mark.django_db
CUT = "/api/v1/reader-groups/shop/billing/truncation-cut/"


@pytest.fixture
def streams():
    """shop/a (2 segments) and shop/b (1), 10 events a segment, read by the MANUAL group
    shop/billing from their heads; shop/c exists but the group does not read it."""
    made = {}
    for name, segments in (("a", 2), ("b", 1), ("c", 1)):
        made[name] = factories.make_stream(name, segment_count=segments)
        for seg in made[name].segment_ids:
            factories.publish(made[name], 10, routing_key=factories.routing_key_for(made[name], seg))
    factories.make_group(made["a"], made["b"], retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT")
    return made


def cuts() -> dict[str, dict]:
    return {
        s.stream.full_name: s.acknowledgement_cut
        for s in Subscription.objects.filter(reader_group__name="billing").select_related("stream__scope")
    }


def test_several_streams_cuts_are_published_in_one_call(api, streams):
    answer = api.post(CUT, {"stream_cuts": {"shop/a": {"0": 4, "1": 6}, "shop/b": {"0": 9}}}, format="json")
    assert answer.status_code == 200, answer.content
    assert [s["stream"] for s in answer.json()["streams"]] == ["shop/a", "shop/b"]
    assert answer.json()["streams"][0]["acknowledgement_cut"] == {"0": 4, "1": 6}
    assert cuts() == {"shop/a": {"0": 4, "1": 6}, "shop/b": {"0": 9}}


@pytest.mark.parametrize(
    ("stream_cuts", "status", "code", "field"),
    [
        ({"shop/a": {"0": 4, "1": 6}, "shop/c": {"0": 1}}, 404, "subscriber_not_found", "stream_cuts.shop/c"),
        ({"shop/a": {"0": 4, "1": 6}, "shop/zz": {"0": 1}}, 404, "stream_not_found", "stream_cuts.shop/zz"),
        ({"shop/a": {"0": 4, "1": 6}, "shop/b": {"0": 11}}, 400, "stream_cut_not_valid", "stream_cuts.shop/b"),
        ({"shop/a": {"0": 4}, "shop/b": {"0": 1}}, 400, "stream_cut_not_valid", "stream_cuts.shop/a"),
        ({"shop/a": {"0": 4, "1": 6}, "shop/b": {"0": 1}}, 400, "stream_cut_behind_previous", "stream_cuts.shop/b"),
        ({"shop/a": {"0": 4, "1": 6}, "no-slash": {"0": 1}}, 400, "invalid", "stream_cuts.no-slash"),
    ],
)
def test_one_bad_cut_refuses_them_all_naming_its_stream(api, streams, stream_cuts, status, code, field):
    # given shop/b's cut already at 3
    assert api.post(CUT, {"stream": "shop/b", "stream_cut": {"0": 3}}, format="json").status_code == 200
    before = cuts()

    answer = api.post(CUT, {"stream_cuts": stream_cuts}, format="json")

    assert answer.status_code == status, answer.content
    assert (answer.json()["code"], answer.json()["field"]) == (code, field)
    assert "nothing was applied" in answer.json()["message"]
    assert cuts() == before  # shop/a's good cut was not applied either


def test_a_refusal_lists_every_failing_stream_with_its_code(api, streams):
    answer = api.post(CUT, {"stream_cuts": {"shop/c": {"0": 1}, "shop/b": {"0": 99}}}, format="json")
    assert answer.status_code == 404
    errors = answer.json()["errors"]
    assert {name: e["code"] for name, e in errors.items()} == {
        "shop/c": "subscriber_not_found",
        "shop/b": "stream_cut_not_valid",
    }
    assert errors["shop/b"]["field"] == "stream_cut.0"


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"stream_cuts": {}}, 400, "stream_cuts"),
        ({"stream_cuts": [["shop/a", {"0": 1}]]}, 400, "stream_cuts"),
        ({"stream_cuts": {"shop/b": {"0": 1}}, "stream": "shop/b"}, 400, "stream"),
        ({"stream_cuts": {"shop/b": {"0": 1}}, "generation": 7}, 409, "generation"),
        ({"stream_cuts": {"shop/b": {"0": 1}}, "generation": "0"}, 400, "generation"),
    ],
)
def test_a_malformed_request_names_its_field_and_applies_nothing(api, streams, body, status, field):
    before = cuts()
    answer = api.post(CUT, body, format="json")
    assert answer.status_code == status, answer.content
    assert answer.json()["field"] == field
    assert cuts() == before


def test_the_generation_is_checked_once_for_the_whole_call(api, streams):
    answer = api.post(CUT, {"stream_cuts": {"shop/b": {"0": 2}}, "generation": 0}, format="json")
    assert answer.status_code == 200 and cuts()["shop/b"] == {"0": 2}
