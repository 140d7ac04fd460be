"""The client's `consume()` loop goes on across an operator's seek and across Redis losing the
group's state: the read that carries the last batch's acknowledgement is not refused for it; the
stale deliveries are counted in `refused`, and every event comes (again) from where the group
stands now."""

import factories
import pytest
from faults.test_redis_restarted import RedisServer

from cbr_client import Client
from domain.events import EventIn
from groups.models import ReadPosition
from streams import logs, services

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EVENTS = 30


def publish(stream):
    log = logs.stream_log(stream)
    keys = {seg: next(k for k in (f"k{i}".encode() for i in range(100)) if log.route(k) == seg) for seg in ("0", "1")}
    services.do_publish(stream, [EventIn(f"e{i}".encode(), routing_key=keys[str(i % 2)]) for i in range(EVENTS)])


def consume(group, at_message: int, then) -> list:
    """Consume to the end, acknowledging each message; `then()` runs once `at_message` messages
    are in (within the first batch: the next read carries their acknowledgement)."""
    seen = []
    for message in group.consume(max_events=5, wait_ms=0, idle_stop=True):
        seen.append((message.data["segment"], message.data["offset"], message.data["delivery_count"]))
        message.ack()
        if len(seen) == at_message:
            then()
    return seen


def test_consume_goes_on_across_a_seek(live_server, admin_user):
    token = factories.token_for(admin_user)
    stream = services.do_create_stream(scope="shop", name="orders", segment_count=2)
    publish(stream)
    with Client(live_server.url, token=token) as cbr, Client(live_server.url, token=token) as operator:
        group = cbr.create_reader_group("shop", "billing", ["shop/orders"], retention_type="NONE")

        # when: an operator seeks the group back to the head while a consumer holds a batch
        seen = consume(group, 5, lambda: operator.reader_group("shop/billing").seek("head"))

    # then: the loop went on, the carried acks were counted as refused, and every event came
    # again from the head
    assert group.refused == 5
    assert sorted((s, o) for s, o, _ in seen[5:]) == sorted((str(i % 2), i // 2) for i in range(EVENTS))
    assert {p.segment_id: p.floor for p in ReadPosition.objects.all()} == {"0": 15, "1": 15}


def test_consume_goes_on_across_redis_losing_its_state(live_server, admin_user, tmp_path, settings):
    server = RedisServer(tmp_path / "redis")
    server.start()
    settings.REDIS_URL = server.url  # the live server's requests use it from now on
    try:
        token = factories.token_for(admin_user)
        stream = services.do_create_stream(scope="shop", name="orders", segment_count=2)
        publish(stream)
        with Client(live_server.url, token=token) as cbr:
            group = cbr.create_reader_group("shop", "billing", ["shop/orders"], retention_type="NONE")

            def restart_empty():
                server.kill()
                server.start()

            # when: Redis is killed and started empty while the consumer holds its first batch
            seen = consume(group, 5, restart_empty)
    finally:
        server.proc.terminate()
        server.proc.wait(10)

    # then: the loop went on; the first batch's carried acks were refused (their leases went with
    # Redis), its events came again counting on, and everything was processed
    assert group.refused == 5
    first = {(s, o) for s, o, _ in seen[:5]}
    again = [(s, o, n) for s, o, n in seen[5:] if (s, o) in first]
    assert sorted((s, o) for s, o, _ in again) == sorted(first) and {n for *_, n in again} == {2}
    assert sorted((s, o) for s, o, _ in seen[5:]) == sorted((str(i % 2), i // 2) for i in range(EVENTS))
    assert {p.segment_id: p.floor for p in ReadPosition.objects.all()} == {"0": 15, "1": 15}
