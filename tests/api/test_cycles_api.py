import pytest

from retention.models import RetentionCycle
from retention.policy_spec import parse_policy
from streams import services

pytestmark = pytest.mark.django_db

URL = "/api/v1/retention/cycles/"


def test_only_admins_queue_a_cycle(user_api):
    assert user_api.post(URL, {}, format="json").status_code == 403
    assert not RetentionCycle.objects.exists()


@pytest.mark.parametrize(
    "body, status, field",
    [
        ({"now": "yesterday"}, 400, "now"),
        ({"stream": "no-slash"}, 400, "stream"),
        ({"stream": "shop/nope"}, 404, "stream"),
        ({"stream": "shop/no-policy"}, 404, "stream"),
        ({"colour": "red"}, 400, "colour"),
    ],
)
def test_a_bad_cycle_request_names_the_field_and_queues_nothing(api, body, status, field):
    services.do_create_stream(scope="shop", name="no-policy")
    response = api.post(URL, body, format="json")
    assert response.status_code == status, response.content
    assert response.json()["field"] == field
    assert not RetentionCycle.objects.exists()


def test_a_cycle_shows_its_state_and_progress(api, user_api):
    stream = services.do_create_stream(
        scope="shop", name="orders", policy=parse_policy({"limit_type": "size", "min": 1})
    )
    cycle = RetentionCycle.objects.create(
        trigger="api", stream=stream, state="running", streams_done=1, streams_total=4
    )
    body = user_api.get(f"{URL}{cycle.pk}/").json()
    assert body["state"] == "running" and body["progress"] == 0.25 and body["stream"] == "shop/orders"
    assert user_api.get(URL).json()["count"] == 1
    assert api.get(f"{URL}999/").status_code == 404
