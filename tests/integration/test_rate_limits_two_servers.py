"""Rate limits end to end, across web processes: two real web servers (gunicorn, two processes
each) on one database and one Redis, clients publishing and reading through both at once as fast
as they can. What the limits let through over the run stays within 10 % of the setting (plus the
one second's burst a bucket starts with): one bucket in Redis, whatever process a request meets. (Each process with a bucket of its own
would let two to four times the setting through.)"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import factories
import pytest

from integration.conftest import WebServer, _free_port

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def call(url: str, token: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Token {token}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def hammer(urls: list[str], token: str, body: dict, seconds: float, count) -> tuple[int, float]:
    """Two clients per URL sending `body` back to back for `seconds`: what `count(status, answer)`
    adds up, and the run's length."""
    total = [0]
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(url: str) -> None:
        while time.monotonic() < stop:
            n = count(*call(url, token, body))
            with lock:
                total[0] += n

    threads = [threading.Thread(target=client, args=(url,)) for url in urls for _ in range(2)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return total[0], time.monotonic() - started


@pytest.fixture
def two_servers(web_server, tmp_path):
    other = WebServer(web_server.env, _free_port(), tmp_path / "web-2.log")
    other.start()
    yield web_server, other
    other.kill()


def test_a_publish_rate_holds_across_two_servers(two_servers, admin_user):
    token = factories.token_for(admin_user)
    first, second = two_servers
    rate, seconds = 100, 4
    status, _ = call(
        f"{first.url}/api/v1/streams/",
        token,
        {"scope": "shop", "name": "orders", "publish_rate": {"events_per_s": rate}},
    )
    assert status == 201
    urls = [f"{server.url}/api/v1/streams/shop/orders/events/" for server in two_servers]
    accepted, took = hammer(
        urls, token, {"events": [{"payload": "x"}] * 5}, seconds, lambda status, _: 5 if status == 201 else 0
    )
    measured = (accepted - rate) / took  # less the bucket's first second
    assert rate * 0.9 <= measured <= rate * 1.1


def test_a_dispatch_rate_holds_across_two_servers(two_servers, admin_user):
    token = factories.token_for(admin_user)
    first, _ = two_servers
    rate, seconds = 50, 4
    assert call(f"{first.url}/api/v1/streams/", token, {"scope": "shop", "name": "orders"})[0] == 201
    group = {"scope": "shop", "name": "billing", "streams": ["shop/orders"], "dispatch_rate": {"events_per_s": rate}}
    assert call(f"{first.url}/api/v1/reader-groups/", token, {**group, "ack_policy": "none"})[0] == 201
    for _ in range(10):
        events = {"events": [{"payload": "x"}] * 100}
        assert call(f"{first.url}/api/v1/streams/shop/orders/events/", token, events)[0] == 201
    urls = [f"{server.url}/api/v1/reader-groups/shop/billing/read/" for server in two_servers]
    handed, took = hammer(
        urls, token, {"max_events": 20, "wait_ms": 200}, seconds, lambda status, answer: len(answer["deliveries"])
    )
    measured = (handed - rate) / took  # less the bucket's first second
    assert rate * 0.9 <= measured <= rate * 1.1
