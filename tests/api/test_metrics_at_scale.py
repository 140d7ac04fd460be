"""`/metrics` costs the same number of queries and Redis round trips whatever the number of
reader groups and streams (issue 37: a query and a round trip per group made a scrape with 1 000
groups take 3 s, and a few thousand outlast Prometheus' 10 s scrape timeout), and its figures
are still each group's own (`group_state`, what the API and the console show)."""

import re
import threading

import factories
import pytest
import redis as redis_lib
import redis.connection
from django.utils import timezone

from groups.models import ReaderGroup, ReadPosition, Subscription
from groups.projections.lag import group_state
from groups.projections.overview import totals_by_stream
from store.redis_connection import get_redis
from streams import wait_stats
from streams.models import Scope

pytestmark = pytest.mark.django_db

API = "/api/v1/reader-groups/"
SEGMENTS = 2


@pytest.fixture
def stream():
    stream = factories.make_stream(
        "orders", segment_count=SEGMENTS, policy={"limit_type": "size", "min": 1, "consumption_based": True}
    )
    for segment in stream.segment_ids:
        key = factories.routing_key_for(stream, segment)
        factories.publish(stream, 10, routing_key=key)
    return stream


def make_groups_in_bulk(stream, first: int, last: int) -> None:
    """Groups g<first>…g<last - 1> on the stream as the services leave them (a subscription and a
    position per segment), written in bulk; every other one a subscriber with a cut."""
    scope, _ = Scope.objects.get_or_create(name="bulk")
    now = timezone.now()
    groups = ReaderGroup.objects.bulk_create(
        ReaderGroup(
            scope=scope, name=f"g{i:05d}", retention_type="AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT" if i % 2 else "NONE"
        )
        for i in range(first, last)
    )
    subs = Subscription.objects.bulk_create(
        Subscription(
            reader_group=g,
            stream=stream,
            acknowledgement_cut={s: 1 for s in stream.segment_ids} if g.is_subscriber else None,
            acknowledged_at=now if g.is_subscriber else None,
        )
        for g in groups
    )
    ReadPosition.objects.bulk_create(
        ReadPosition(subscription=s, segment_id=seg) for s in subs for seg in stream.segment_ids
    )


def call(api, group: str, what: str, body: dict) -> dict:
    answer = api.post(f"{API}bulk/{group}/{what}/", body, format="json")
    assert answer.status_code == 200, answer.content
    return answer.json()


def read_and_ack(api, group: str, n: int = 4, acked: int = 2) -> list[str]:
    """The group reads `n` events and acknowledges the first `acked`; the others' ids."""
    ids = [d["delivery_id"] for d in call(api, group, "read", {"max_events": n})["deliveries"]]
    if acked:
        call(api, group, "ack", {"delivery_ids": ids[:acked]})
    return ids[acked:]


@pytest.fixture
def redis_round_trips(monkeypatch):
    """What this thread sends Redis, counted: a command, or a whole pipeline, is one."""
    sent = []
    original = redis.connection.AbstractConnection.send_packed_command
    scraping = threading.get_ident()  # the scrape's own: not the process's wake-up listener's flushes

    def counted(conn, command, check_health=True):
        if threading.get_ident() == scraping:
            sent.append(1)
        return original(conn, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
    return sent


def scrape(client, django_assert_max_num_queries, sent, max_queries: int = 1000) -> tuple[str, int, int]:
    """/metrics: its text, its queries and its Redis round trips."""
    sent.clear()
    with django_assert_max_num_queries(max_queries) as queries:
        answer = client.get("/metrics")
    assert answer.status_code == 200
    return answer.content.decode(), len(queries), len(sent)


def test_a_scrape_with_10_000_groups_makes_the_queries_and_round_trips_of_one_with_10(
    client, api, stream, django_assert_max_num_queries, redis_round_trips, settings
):
    # given 10 groups, 3 of which have read (their trackers hold state in Redis), and the entry
    # of a web process gone long ago among those that say how many reads wait
    redis_lib.Redis.from_url(settings.REDIS_URL).hset(wait_stats.WAITING_KEY, "gone:1", "3 0")
    make_groups_in_bulk(stream, 0, 10)
    for name in ("g00000", "g00001", "g00002"):
        read_and_ack(api, name)
    # the consumers' figures in Redis now, not at the wake-up listener's next second, and a
    # first scrape that loads the scripts it runs: neither may fall between the two counted
    wait_stats.flush(get_redis(), 0)
    scrape(client, django_assert_max_num_queries, redis_round_trips)
    text, queries, trips = fewest(scrape(client, django_assert_max_num_queries, redis_round_trips) for _ in range(2))
    assert text.count("cbr_reader_group_pending{") == 10

    # when there are 10 000
    make_groups_in_bulk(stream, 10, 10_000)
    text, queries_at_10k, trips_at_10k = fewest(
        scrape(client, django_assert_max_num_queries, redis_round_trips, queries) for _ in range(2)
    )

    # then the scrape made no more queries nor round trips, and still tells every group apart
    assert (queries_at_10k, trips_at_10k) == (queries, trips)
    assert text.count("cbr_reader_group_pending{") == 10_000
    assert text.count("cbr_subscriber_active{") == 5_000
    assert 'cbr_reader_group_floor_lag_events{reader_group="bulk/g09999",stream="shop/orders"} 20.0' in text
    assert 'cbr_subscriber_held_back_events{reader_group="bulk/g09999",stream="shop/orders"} 18.0' in text
    assert 'cbr_reader_group_pending{reader_group="bulk/g00000",stream="shop/orders"} 2.0' in text


def fewest(scrapes) -> tuple[str, int, int]:
    """The scrape with the fewest round trips: Redis's scripts are the server's, not a database's,
    and a test process that flushes them (tests of a Redis restart, in another process of the
    suite) makes a scrape at that moment send its pipelines twice (NOSCRIPT, then again)."""
    return min(scrapes, key=lambda scraped: scraped[2])


def samples(text: str, group: str) -> dict[str, float]:
    """The group's reader-group samples by family."""
    found = re.findall(rf'^(cbr_reader_group_\w+)\{{reader_group="{group}",stream="shop/orders"\}} (\S+)$', text, re.M)
    return {name: float(value) for name, value in found}


def test_each_groups_figures_are_what_its_own_positions_say(client, api, stream):
    # given groups reading, redelivering, halted on a poison event, and one that never read
    make_groups_in_bulk(stream, 0, 4)
    read_and_ack(api, "g00000")
    call(api, "g00001", "nack", {"delivery_ids": read_and_ack(api, "g00001")})
    read_and_ack(api, "g00001", n=10, acked=0)  # the nacked two again, and more
    patched = api.patch(f"{API}bulk/g00002/", {"max_deliveries": 1, "on_poison": "halt"}, format="json")
    assert patched.status_code == 200, patched.content
    call(api, "g00002", "nack", {"delivery_ids": read_and_ack(api, "g00002", n=1, acked=0)})
    # (a read of one event serves one segment, picked at random: this one looks at both)
    read_and_ack(api, "g00002", n=10, acked=0)

    text = client.get("/metrics").content.decode()

    for group in ReaderGroup.objects.filter(scope__name="bulk"):
        totals = totals_by_stream(group_state(group))["shop/orders"]
        assert samples(text, str(group)) == {
            "cbr_reader_group_pending": totals.pending,
            "cbr_reader_group_floor_lag_events": totals.lag_events,
            "cbr_reader_group_halted": 1.0 if totals.halted else 0.0,
            "cbr_reader_group_redelivered_total": totals.redelivered,
            "cbr_reader_group_dead_lettered_total": totals.dead_lettered,
        }, group
    assert samples(text, "bulk/g00001")["cbr_reader_group_redelivered_total"] == 2.0
    assert samples(text, "bulk/g00002")["cbr_reader_group_halted"] == 1.0
    assert samples(text, "bulk/g00003")["cbr_reader_group_floor_lag_events"] == 20.0
