"""A setting declared once (`domain.fields`) is held to the same bounds at every edge: the API's
policy, stream and scope-defaults requests, and the console's policy, stream-settings and
scope-defaults forms. For each whole-number setting of the retention policy and of compaction,
its lowest and highest values are taken everywhere and one past either end is refused everywhere,
naming the field, with nothing saved."""

import factories
import pytest
from page_text import text

from domain.compaction import COMPACTION_FIELDS
from domain.fields import Whole
from domain.policy_spec import POLICY_FIELDS
from retention.models import RetentionPolicy
from streams.models import ScopeDefaults, Stream

pytestmark = pytest.mark.django_db

STREAM = "/api/v1/streams/shop/orders/"
DEFAULTS = "/api/v1/scopes/shop/defaults/"


def _cases(table: dict) -> list:
    out = []
    for name, declared in table.items():
        if isinstance(declared, Whole):
            out += [(name, declared.low, True), (name, declared.high, True)]
            out += [(name, declared.low - 1, False), (name, declared.high + 1, False)]
    return out


def _policy(name: str, value: int) -> dict:
    """A time policy whose `name` is `value` (max as large as min can be, when min is tested)."""
    policy = {"limit_type": "time", name: value}
    if name == "max" and value >= 0:
        policy["min"] = 0
    return policy


@pytest.mark.parametrize("name, value, taken", _cases(POLICY_FIELDS))
def test_a_policy_setting_has_one_set_of_bounds(api, admin_client, name, value, taken):
    stream = factories.create_stream_over_api(api, "orders")
    answer = api.put(STREAM + "retention-policy/", _policy(name, value), format="json")
    assert (answer.status_code == 200) is taken, answer.content
    if not taken:
        assert answer.json()["field"] == name
    RetentionPolicy.objects.filter(stream=stream).delete()
    form = {"limit_type": "time", "min": "0", **{k: str(v) for k, v in _policy(name, value).items()}}
    page = admin_client.post("/streams/shop/orders/policy/", form, HTTP_HX_REQUEST="true")
    assert RetentionPolicy.objects.filter(stream=stream).exists() is taken, text(page.content.decode())
    scope = api.put(DEFAULTS, {"retention_policy": _policy(name, value)}, format="json")
    assert (scope.status_code == 200) is taken, scope.content
    if not taken:
        assert scope.json()["field"] == f"retention_policy.{name}"


@pytest.mark.parametrize("name, value, taken", _cases(COMPACTION_FIELDS))
def test_a_compaction_setting_has_one_set_of_bounds(api, admin_client, name, value, taken):
    stream = factories.create_stream_over_api(api, "orders")
    before = getattr(stream, name)
    answer = api.patch(STREAM, {name: value}, format="json")
    assert (answer.status_code == 200) is taken, answer.content
    if not taken:
        assert answer.json()["field"] == name
    Stream.objects.filter(pk=stream.pk).update(**{name: before})
    settings_form = {"description": "", "cleanup_policy": "delete", "on_max_limit": "truncate", name: str(value)}
    page = admin_client.post("/streams/shop/orders/settings/", settings_form)
    assert (getattr(Stream.objects.get(pk=stream.pk), name) == value) is taken, text(page.content.decode())
    scope = api.put(DEFAULTS, {name: value}, format="json")
    assert (scope.status_code == 200) is taken, scope.content
    if not taken:
        assert scope.json()["field"] == name
    ScopeDefaults.objects.all().delete()
    admin_client.post("/scopes/shop/defaults/", {name: str(value)})
    saved = ScopeDefaults.objects.filter(**{name: value}).exists()
    assert saved is taken


def test_the_console_shows_every_field_of_a_policy_in_its_words(api, admin_client):
    """The stream page's policy panel is made from the table: each field, its value in what it
    measures, a null as what it means."""
    factories.create_stream_over_api(
        api, "orders", retention_policy={"limit_type": "size", "min": 2048, "max": None, "fallback_after_s": 5400}
    )
    page = text(admin_client.get("/streams/shop/orders/").content.decode())
    for label in (
        "Min 2.0 KiB",
        "Max —",
        "Consumption-based no",
        "Subscriber timeout never stale",
        "Fall back after 1 h 30 min",
    ):
        assert label in page, label
