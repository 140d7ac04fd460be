"""Tags on streams and reader groups (docs/api.md): set on create, replaced by PATCH, shown in
details and lists, lists filtered by `?tag=key:value` (repeatable: all must match) or
`?tag=key`; bad tags and bad filters refused naming the field, nothing written."""

import factories
import pytest

from domain.tags import MAX_TAGS
from groups.models import ReaderGroup
from streams.models import Stream

pytestmark = pytest.mark.django_db
STREAMS = "/api/v1/streams/"
GROUPS = "/api/v1/reader-groups/"


def names(answer) -> list[str]:
    assert answer.status_code == 200, answer.content
    return sorted(row["name"] for row in answer.json()["results"])


def test_streams_carry_tags_and_lists_filter_by_them(api):
    factories.create_stream_over_api(api, "orders", tags={"team": "payments", "env": "prod"})
    factories.create_stream_over_api(api, "refunds", tags={"team": "payments", "env": "staging"})
    factories.create_stream_over_api(api, "clicks", tags={"team": "web", "note": "a: b / c", "x__y": "1"})
    factories.create_stream_over_api(api, "plain")
    assert api.get(STREAMS + "shop/orders/").json()["tags"] == {"team": "payments", "env": "prod"}
    assert api.get(STREAMS + "shop/plain/").json()["tags"] == {}
    assert names(api.get(STREAMS, {"tag": "team:payments"})) == ["orders", "refunds"]
    assert names(api.get(STREAMS + "?tag=team:payments&tag=env:prod")) == ["orders"]  # all must match
    assert names(api.get(STREAMS, {"tag": "env"})) == ["orders", "refunds"]  # any value of the key
    assert names(api.get(STREAMS, {"tag": "note:a: b / c"})) == ["clicks"]  # the value after the first colon
    assert names(api.get(STREAMS, {"tag": "team:nobody"})) == []
    assert names(api.get(STREAMS, {"tag": "x__y:1"})) == names(api.get(STREAMS, {"tag": "x__y"})) == ["clicks"]
    changed = api.patch(STREAMS + "shop/orders/", {"tags": {"team": "risk"}}, format="json")
    assert changed.status_code == 200 and changed.json()["tags"] == {"team": "risk"}  # replaced whole
    assert names(api.get(STREAMS, {"tag": "team:payments"})) == ["refunds"]
    assert api.patch(STREAMS + "shop/orders/", {"tags": {}}, format="json").json()["tags"] == {}


def test_groups_carry_tags_and_lists_filter_by_them(api):
    factories.create_stream_over_api(api, "orders")
    factories.create_group_over_api(api, "billing", tags={"team": "payments"})
    factories.create_group_over_api(api, "audit", tags={"team": "risk"})
    assert api.get(GROUPS + "shop/billing/").json()["tags"] == {"team": "payments"}
    assert names(api.get(GROUPS, {"tag": "team:risk"})) == ["audit"]
    assert names(api.get(GROUPS, {"tag": "team"})) == ["audit", "billing"]
    changed = api.patch(GROUPS + "shop/audit/", {"tags": {"team": "payments", "tier": "1"}}, format="json")
    assert changed.status_code == 200 and changed.json()["tags"] == {"team": "payments", "tier": "1"}
    assert names(api.get(GROUPS, {"tag": "team:payments"})) == ["audit", "billing"]


BAD_TAGS = [
    ({"Team": "x"}, "tags.Team"),  # upper case
    ({"": "x"}, "tags."),
    ({"k" * 64: "x"}, "tags." + "k" * 64),
    ({"team": 5}, "tags.team"),
    ({"team": "x" * 257}, "tags.team"),
    ({"team": "a\nb"}, "tags.team"),
    (["team", "x"], "tags"),
    ("team=x", "tags"),
    ({f"k{i}": "v" for i in range(MAX_TAGS + 1)}, "tags"),
]


@pytest.mark.parametrize(("tags", "field"), BAD_TAGS)
def test_bad_tags_are_refused_naming_the_field_and_nothing_is_written(api, tags, field):
    refused = api.post(STREAMS, {"scope": "shop", "name": "orders", "tags": tags}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == field, refused.content
    assert not Stream.objects.exists()
    factories.create_stream_over_api(api, "orders", tags={"team": "payments"})
    refused = api.patch(STREAMS + "shop/orders/", {"tags": tags}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == field
    assert Stream.objects.get().tags == {"team": "payments"}
    answer = api.post(
        GROUPS, {"scope": "shop", "name": "billing", "streams": ["shop/orders"], "tags": tags}, format="json"
    )
    assert answer.status_code == 400 and answer.json()["field"] == field
    assert not ReaderGroup.objects.exists()


@pytest.mark.parametrize("tag", ["Team:x", ":x", "a b:c", "team:a\tb", "k" * 64])
def test_a_bad_tag_filter_is_refused_naming_tag(api, tag):
    for url in (STREAMS, GROUPS):
        refused = api.get(url, {"tag": tag})
        assert refused.status_code == 400 and refused.json()["field"] == "tag", refused.content
