"""A stream's publish rate (docs/api.md): one token bucket per stream
in Redis, shared by every web process; a publish over it is refused whole with 429
`rate_limited` and `Retry-After`, nothing of it written. The bucket measured with a fake clock:
whatever the batch sizes, what it lets through over a window stays within 10 % of the setting."""

import math
import random

import factories
import pytest

from streams import logs
from streams.models import Stream
from streams.rate_limits import bucket_key, take_publish

pytestmark = pytest.mark.django_db
S = "/api/v1/streams/"


def measured_rate(stream, seconds: float, batch_sizes, payload: int, seed: int) -> tuple[float, float]:
    """Producers publishing as fast as the bucket lets them for `seconds` of a fake clock, each
    waiting what a refusal says: (events/s, bytes/s) let through."""
    rng = random.Random(seed)
    now, events, size = 1_000.0, 0, 0
    end = now + seconds
    while now < end:
        n = rng.choice(batch_sizes)
        wait = take_publish(stream, n, n * payload, now=now)
        if wait is None:
            events, size = events + n, size + n * payload
            now += 0.001  # the next request
        else:
            assert wait > 0
            now += wait
    return events / seconds, size / seconds


@pytest.mark.parametrize(
    ("rate", "batches", "payload"),
    [
        ({"events_per_s": 100}, [1], 10),
        ({"events_per_s": 100}, [1, 7, 50, 300], 10),  # batches larger than a second's worth
        ({"events_per_s": 0.5}, [1, 2], 10),  # one event every two seconds
        ({"bytes_per_s": 1_048_576}, [1, 10, 100], 10_000),  # Pulsar's 1 MB/s that let 11.9 through
        ({"events_per_s": 1000, "bytes_per_s": 50_000}, [5, 20], 100),  # the bytes limit binds
    ],
)
def test_the_measured_rate_stays_within_ten_percent_of_the_setting(redis, rate, batches, payload):
    stream = factories.make_stream(publish_rate=rate)
    redis.delete(bucket_key(stream))
    events, size = measured_rate(stream, 60, batches, payload, seed=len(batches))
    if "events_per_s" in rate:
        assert events <= rate["events_per_s"] * 1.1
    if "bytes_per_s" in rate:
        assert size <= rate["bytes_per_s"] * 1.1
    # and the limit is used, not starved: the binding rate is reached
    used = [events / rate["events_per_s"]] if "events_per_s" in rate else []
    used += [size / rate["bytes_per_s"]] if "bytes_per_s" in rate else []
    assert max(used) >= 0.9  # the limit that binds is reached, not starved


def test_a_publish_over_the_rate_is_refused_whole_with_retry_after(api, redis):
    created = api.post(S, {"scope": "shop", "name": "orders", "publish_rate": {"events_per_s": 5}}, format="json")
    assert created.status_code == 201 and created.json()["publish_rate"] == {"events_per_s": 5.0}
    # a batch of five seconds' worth passes whole and leaves a debt: the next one waits it out
    # (4.6 s from now: a busy machine's seconds between the two calls cannot let it through)
    ok = api.post(S + "shop/orders/events/", {"events": [{"payload": "x"}] * 25}, format="json")
    assert ok.status_code == 201
    before = factories.rate_limited_total(api, "publish")
    refused = api.post(S + "shop/orders/events/", {"events": [{"payload": "y"}] * 3}, format="json")
    assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
    wait = refused.json()["retry_after_s"]
    assert refused.json()["field"] == "publish_rate" and 0 < wait <= 4.6
    assert refused["Retry-After"] == str(math.ceil(wait))
    stream = Stream.objects.get()
    assert logs.stream_log(stream).tail_cut() == {"0": 25}  # nothing of the refused batch
    assert factories.rate_limited_total(api, "publish") == before + 1
    # the limit removed: publishes go on at once
    assert api.patch(S + "shop/orders/", {"publish_rate": None}, format="json").json()["publish_rate"] == {}
    assert api.post(S + "shop/orders/events/", {"events": [{"payload": "z"}] * 50}, format="json").status_code == 201


@pytest.mark.parametrize(
    ("rate", "field"),
    [
        ({"events_per_s": 0}, "publish_rate.events_per_s"),
        ({"events_per_s": -1}, "publish_rate.events_per_s"),
        ({"bytes_per_s": "100"}, "publish_rate.bytes_per_s"),
        ({"bytes_per_s": True}, "publish_rate.bytes_per_s"),
        ({"events_per_s": None}, "publish_rate.events_per_s"),  # the schema says a number
        ({"events_per_s": 10**12}, "publish_rate.events_per_s"),
        ({"messages_per_s": 5}, "publish_rate.messages_per_s"),
        ([5], "publish_rate"),
    ],
)
def test_bad_rates_are_refused_naming_the_field_and_nothing_changes(api, rate, field):
    refused = api.post(S, {"scope": "shop", "name": "orders", "publish_rate": rate}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == field, refused.content
    assert not Stream.objects.exists()
    factories.create_stream_over_api(api, "orders", publish_rate={"events_per_s": 10})
    refused = api.patch(S + "shop/orders/", {"publish_rate": rate}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == field
    assert Stream.objects.get().publish_rate == {"events_per_s": 10.0}
