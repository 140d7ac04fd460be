"""A reader group's dispatch rate (docs/consuming.md): one token bucket of events per group in
Redis, shared by every web process; its reads hand out no more than it lets them (fewer
deliveries or none, never an error), give back what they took and did not hand out, and a waiting
read waits until the bucket refills. The bucket measured with a fake clock: whatever the reads ask
for and find, what it lets out over a window stays within 10 % of the setting."""

import random
import time

import factories
import pytest

from groups import dispatching
from groups.models import ReaderGroup

pytestmark = pytest.mark.django_db
G = "/api/v1/reader-groups/"


def measured_rate(group, seconds: float, asks, found, seed: int) -> float:
    """Consumers reading as fast as the bucket lets them for `seconds` of a fake clock: each read
    asks for `asks` events, finds up to `found` (it hands out the fewer of those and what it took),
    gives back the rest, and waits what an empty bucket says. Events/s handed out."""
    rng = random.Random(seed)
    now, handed = 1_000.0, 0
    end = now + seconds
    while now < end:
        took, wait = dispatching.take(group, rng.choice(asks), now=now)
        if took:
            out = min(took, rng.choice(found))
            handed += out
            dispatching.give_back([(group, took - out)], now=now)
            now += 0.001  # the next read
        else:
            assert wait > 0
            now += wait
    return handed / seconds


@pytest.mark.parametrize(
    ("rate", "asks", "found"),
    [
        (100, [1], [1]),
        (100, [10, 100, 1000], [1000]),  # reads that ask for more than a second's worth
        (100, [500], [0, 3, 50, 500]),  # reads that find fewer than they took give the rest back
        (0.5, [1, 10], [10]),  # one event every two seconds
        (20_000, [1000], [1000]),
    ],
)
def test_the_measured_rate_stays_within_ten_percent_of_the_setting(redis, rate, asks, found):
    stream = factories.make_stream()
    group = factories.make_group(stream, dispatch_rate={"events_per_s": rate})
    handed = measured_rate(group, 60, asks, found, seed=len(asks))
    assert handed <= rate * 1.1
    if max(found) >= 1:
        assert handed >= rate * 0.9 * (0.5 if 0 in found else 1)  # used, not starved


def read(api, group="billing", **body):
    response = api.post(f"{G}shop/{group}/read/", {"max_events": 100, **body}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["deliveries"]


def test_reads_hand_out_no_more_than_the_rate_and_a_waiting_read_waits_for_it(api, redis):
    factories.create_stream_over_api(api)
    created = factories.create_group_over_api(api, dispatch_rate={"events_per_s": 5}, start="head")
    assert created["dispatch_rate"] == {"events_per_s": 5.0}
    factories.publish_over_api(api, [{"payload": f"e{i}"} for i in range(50)])
    before = factories.rate_limited_total(api, "dispatch")

    assert len(read(api)) == 5  # a second's worth
    assert read(api) == []  # never an error: nothing more this instant
    started = time.monotonic()
    waited = read(api, wait_ms=5000)
    assert len(waited) == 1 and time.monotonic() - started < 5  # woken when the bucket holds one
    assert factories.rate_limited_total(api, "dispatch") >= before + 2  # the first two reads wanted more


def test_what_a_read_took_and_did_not_hand_out_goes_back(api, redis):
    factories.create_stream_over_api(api)
    factories.create_group_over_api(api, dispatch_rate={"events_per_s": 10}, start="head")
    factories.publish_over_api(api, [{"payload": "a"}, {"payload": "b"}])
    assert len(read(api)) == 2  # took ten, handed out two: eight go back
    factories.publish_over_api(api, [{"payload": f"n{i}"} for i in range(20)])
    assert len(read(api)) == 8


def test_the_rate_is_changed_and_removed_by_patch(api, redis):
    factories.create_stream_over_api(api)
    factories.create_group_over_api(api, dispatch_rate={"events_per_s": 1}, start="head")
    factories.publish_over_api(api, [{"payload": f"e{i}"} for i in range(30)])
    assert len(read(api)) == 1
    changed = api.patch(f"{G}shop/billing/", {"dispatch_rate": None}, format="json")
    assert changed.status_code == 200 and changed.json()["dispatch_rate"] == {}
    assert len(read(api)) == 29
    assert api.get(f"{G}shop/billing/").json()["dispatch_rate"] == {}


@pytest.mark.parametrize(
    ("rate", "field"),
    [
        ({"events_per_s": 0}, "dispatch_rate.events_per_s"),
        ({"events_per_s": -3}, "dispatch_rate.events_per_s"),
        ({"events_per_s": "10"}, "dispatch_rate.events_per_s"),
        ({"events_per_s": None}, "dispatch_rate.events_per_s"),  # the schema says a number
        ({"events_per_s": 10**12}, "dispatch_rate.events_per_s"),
        ({"bytes_per_s": 5}, "dispatch_rate.bytes_per_s"),
        ("fast", "dispatch_rate"),
    ],
)
def test_bad_rates_are_refused_naming_the_field_and_nothing_changes(api, rate, field):
    factories.create_stream_over_api(api)
    refused = api.post(
        G, {"scope": "shop", "name": "billing", "streams": ["shop/orders"], "dispatch_rate": rate}, format="json"
    )
    assert refused.status_code == 400 and refused.json()["field"] == field, refused.content
    assert not ReaderGroup.objects.exists()
    factories.create_group_over_api(api, dispatch_rate={"events_per_s": 10})
    refused = api.patch(f"{G}shop/billing/", {"dispatch_rate": rate}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == field
    assert ReaderGroup.objects.get().dispatch_rate == {"events_per_s": 10.0}
