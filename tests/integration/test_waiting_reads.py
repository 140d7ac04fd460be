"""Reads that wait (docs/api.md) on the real web server (gunicorn with the ASGI front, two
processes): woken by a publish, a lease expiring, a nack's delay ending and a delayed event coming
due; hundreds waiting while publishing and health checks go on; a consumer that goes away while it
waits; the wake-up channel lost with Redis; competing consumers of one group, one woken per event.

No timing is asserted beyond "before its wait ended": every wait here is 30 s and everything it
waits for comes within a few seconds."""

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import factories
import pytest
from faults.test_redis_restarted import RedisServer

from cbr_client import Client
from groups import reader_groups
from streams import services

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

WAIT_MS = 30_000
WOKEN_WITHIN_S = 15  # half the wait: a read answered by then was woken, not timed out


@pytest.fixture
def token(django_user_model):
    return factories.token_for(factories.make_user("waiter", "admin"))


class Http:
    """Requests to the server over connections of their own, from asyncio (hundreds at once)."""

    def __init__(self, url: str, token: str):
        host, port = url.removeprefix("http://").split(":")
        self.host, self.port, self.token = host, int(port), token

    async def open(self, method: str, path: str, body: object = None):
        reader, writer = await asyncio.open_connection(self.host, self.port)
        data = b"" if body is None else json.dumps(body).encode()
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Token {self.token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n"
        )
        writer.write(head.encode() + data)
        await writer.drain()
        return reader, writer

    async def answer(self, reader, writer) -> tuple[int, dict]:
        raw = await reader.read()  # Connection: close: to the end
        writer.close()
        head, _, body = raw.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if b"transfer-encoding: chunked" in head.lower():
            body = _unchunked(body)
        return status, json.loads(body) if body else {}

    async def request(self, method: str, path: str, body: object = None) -> tuple[int, dict]:
        return await self.answer(*await self.open(method, path, body))

    async def read(self, group: str, max_events: int = 1, wait_ms: int = WAIT_MS, consumer: str = ""):
        """A read (waiting), answered: (seconds it took, status, answer)."""
        start = time.monotonic()
        body = {"max_events": max_events, "wait_ms": wait_ms}
        if consumer:
            body["consumer"] = consumer
        status, answer = await self.request("POST", f"/api/v1/reader-groups/{group}/read/", body)
        return time.monotonic() - start, status, answer


def _unchunked(body: bytes) -> bytes:
    out = b""
    while body:
        size, _, rest = body.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            break
        out += rest[:n]
        body = rest[n + 2 :]
    return out


def make_stream(name: str = "orders"):
    return services.do_create_stream(scope="w", name=name, segment_count=2)


def make_group(name: str, **config):
    stream = make_stream() if not services.Stream.objects.filter(name="orders").exists() else None
    stream = stream or services.Stream.objects.get(scope__name="w", name="orders")
    return reader_groups.do_create_reader_group(
        scope="w", name=name, streams=[stream], retention_type="NONE", start="tail", **config
    )


def publish(http: Http, events: list[dict]) -> tuple[int, dict]:
    return asyncio.run(http.request("POST", "/api/v1/streams/w/orders/events/", {"events": events}))


async def soon(seconds: float = 0.5) -> None:
    """Long enough for a read sent just before to be waiting on the server."""
    await asyncio.sleep(seconds)


def test_a_waiting_read_wakes_for_a_publish(web_server, token):
    http = Http(web_server.url, token)
    make_group("g")

    async def run():
        waiting = asyncio.create_task(http.read("w/g"))
        await soon()
        status, _ = await http.request("POST", "/api/v1/streams/w/orders/events/", {"events": [{"payload": "p"}]})
        return status, await waiting

    status, (took, read_status, answer) = asyncio.run(run())
    assert status == 201 and read_status == 200
    assert [d["payload"] for d in answer["deliveries"]] == ["p"]
    assert took < WOKEN_WITHIN_S


def test_a_waiting_read_wakes_for_an_expired_lease_a_nack_and_a_delayed_event(web_server, token):
    http = Http(web_server.url, token)
    make_group("g", ack_timeout_s=1)
    assert publish(http, [{"payload": "leased"}])[0] == 201

    async def run():
        # given: the event handed to one consumer, who never acknowledges it
        _, _, first = await http.read("w/g", consumer="a", wait_ms=0)
        assert [d["payload"] for d in first["deliveries"]] == ["leased"]
        # then: another consumer waiting gets it when the lease expires
        took, _, again = await http.read("w/g", consumer="b")
        assert [(d["payload"], d["delivery_count"]) for d in again["deliveries"]] == [("leased", 2)]
        assert took < WOKEN_WITHIN_S
        # and: given back with a delay, it comes to a waiting read when the delay ends
        status, _ = await http.request(
            "POST",
            "/api/v1/reader-groups/w/g/nack/",
            {"delivery_ids": [again["deliveries"][0]["delivery_id"]], "delay_ms": 1500},
        )
        assert status == 200
        took, _, nacked = await http.read("w/g", consumer="c")
        assert [(d["payload"], d["delivery_count"]) for d in nacked["deliveries"]] == [("leased", 3)]
        assert 1.0 <= took < WOKEN_WITHIN_S
        await http.request(
            "POST", "/api/v1/reader-groups/w/g/ack/", {"delivery_ids": [nacked["deliveries"][0]["delivery_id"]]}
        )
        # and: a delayed event published before the read waits comes when due
        status, _ = await http.request(
            "POST", "/api/v1/streams/w/orders/events/", {"events": [{"payload": "later", "delay_ms": 2000}]}
        )
        assert status == 201
        took, _, delayed = await http.read("w/g", consumer="d")
        assert [d["payload"] for d in delayed["deliveries"]] == ["later"]
        assert 1.0 <= took < WOKEN_WITHIN_S
        await http.request(
            "POST", "/api/v1/reader-groups/w/g/ack/", {"delivery_ids": [delayed["deliveries"][0]["delivery_id"]]}
        )
        # and one published while it waits
        waiting = asyncio.create_task(http.read("w/g", consumer="e"))
        await soon()
        await http.request(
            "POST", "/api/v1/streams/w/orders/events/", {"events": [{"payload": "later2", "delay_ms": 1500}]}
        )
        took, _, delayed = await waiting
        assert [d["payload"] for d in delayed["deliveries"]] == ["later2"]
        assert took < WOKEN_WITHIN_S

    asyncio.run(run())


def test_hundreds_of_waiting_reads_leave_publishing_and_health_checks_alone(web_server, token):
    http = Http(web_server.url, token)
    n = 500
    for i in range(n):
        make_group(f"g{i}")

    async def run():
        waiting = [asyncio.create_task(http.read(f"w/g{i}")) for i in range(n)]
        await soon(3)
        # while they wait: health checks and a publish are answered
        checks = [await http.request("GET", "/healthz") for _ in range(5)]
        assert not any(t.done() for t in waiting)  # nobody was answered without an event
        published = await http.request("POST", "/api/v1/streams/w/orders/events/", {"events": [{"payload": "all"}]})
        done = await asyncio.gather(*waiting)
        return checks, published, done

    checks, published, done = asyncio.run(run())
    assert [status for status, _ in checks] == [200] * 5
    assert published[0] == 201
    assert all(status == 200 for _, status, _ in done), [(s, a) for _, s, a in done if s != 200][:3]
    assert [len(answer["deliveries"]) for _, _, answer in done] == [1] * n  # every group has it
    assert max(took for took, _, _ in done) < WAIT_MS / 1000


def test_a_consumer_that_goes_away_while_waiting_holds_nothing(web_server, token):
    http = Http(web_server.url, token)
    make_group("g")

    async def run():
        reader, writer = await http.open(
            "POST", "/api/v1/reader-groups/w/g/read/", {"max_events": 1, "wait_ms": WAIT_MS}
        )
        await soon()
        writer.close()  # the consumer goes away mid-wait
        await soon()
        await http.request("POST", "/api/v1/streams/w/orders/events/", {"events": [{"payload": "p"}]})
        return await http.read("w/g", consumer="other", wait_ms=5000)

    _, _, answer = asyncio.run(run())
    # the event went to the consumer still there, as a first delivery: the one gone held no lease
    assert [(d["payload"], d["delivery_count"]) for d in answer["deliveries"]] == [("p", 1)]


def test_one_competing_waiting_consumer_is_woken_per_event(web_server, token):
    http = Http(web_server.url, token)
    make_group("g")
    n = 10

    async def run():
        waiting = [asyncio.create_task(http.read("w/g", consumer=f"c{i}")) for i in range(n)]
        await soon(1)
        await http.request("POST", "/api/v1/streams/w/orders/events/", {"events": [{"payload": "one"}]})
        await asyncio.wait(waiting, timeout=3)
        answered = [t for t in waiting if t.done()]
        first = [t.result() for t in answered]
        # the others are still waiting: no herd; then nine more events, one each
        await http.request(
            "POST", "/api/v1/streams/w/orders/events/", {"events": [{"payload": f"more{i}"} for i in range(n - 1)]}
        )
        rest = await asyncio.gather(*[t for t in waiting if t not in answered])
        return first, rest

    first, rest = asyncio.run(run())
    assert [[d["payload"] for d in a["deliveries"]] for _, _, a in first] == [["one"]]
    payloads = sorted(d["payload"] for _, _, a in rest for d in a["deliveries"])
    assert payloads == sorted(f"more{i}" for i in range(n - 1))  # each event to one consumer, each consumer one
    assert max(took for took, _, _ in rest) < WAIT_MS / 1000


async def many(http: Http, reads: list[dict]) -> list[tuple[float, dict]]:
    """Many reads in one request (`POST /api/v1/reads/`), their lines as they come: (seconds
    since the request was sent, the line)."""
    start = time.monotonic()
    reader, writer = await http.open("POST", "/api/v1/reads/", {"reads": reads})
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"application/x-ndjson" in head.lower(), head
    out, buffer = [], b""
    while True:  # chunked: each chunk one or more whole lines
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        data = await reader.readexactly(size + 2)
        if size == 0:
            break
        buffer += data[:-2]
        *complete, buffer = buffer.split(b"\n")
        out += [(time.monotonic() - start, json.loads(line)) for line in complete]
    writer.close()
    return out


def test_hundreds_of_reads_in_one_request_wait_and_wake_for_a_publish(web_server, token):
    http = Http(web_server.url, token)
    n = 300
    for i in range(n):
        make_group(f"g{i}")

    async def run():
        waiting = asyncio.create_task(
            many(http, [{"reader_group": f"w/g{i}", "max_events": 1, "wait_ms": WAIT_MS} for i in range(n)])
        )
        await soon(3)
        checks = [await http.request("GET", "/healthz") for _ in range(5)]
        assert not waiting.done()  # nobody was answered without an event
        # each group's consumer is shown waiting (said for all the request's reads at once)
        for name in ("g0", f"g{n // 2}", f"g{n - 1}"):
            status, consumers = await http.request("GET", f"/api/v1/reader-groups/w/{name}/consumers/")
            assert status == 200 and [c["waiting"] for c in consumers["results"]] == [True], consumers
        published = await http.request("POST", "/api/v1/streams/w/orders/events/", {"events": [{"payload": "all"}]})
        return checks, published, await waiting

    checks, published, lines = asyncio.run(run())
    assert [status for status, _ in checks] == [200] * 5 and published[0] == 201
    assert sorted(line["read"] for _, line in lines) == list(range(n))  # each read one line
    assert all(line["status"] == 200 for _, line in lines)
    assert [[d["payload"] for d in line["answer"]["deliveries"]] for _, line in lines] == [["all"]] * n
    assert max(took for took, _ in lines) < WOKEN_WITHIN_S


def test_competing_consumers_in_one_request_one_woken_per_event_the_rest_wait_on(web_server, token):
    http = Http(web_server.url, token)
    make_group("g")
    n = 5

    async def run():
        waiting = asyncio.create_task(
            many(
                http,
                [{"reader_group": "w/g", "max_events": 1, "wait_ms": 4_000, "consumer": f"c{i}"} for i in range(n)],
            )
        )
        await soon(1)
        events = [{"payload": "one"}, {"payload": "two"}]
        await http.request("POST", "/api/v1/streams/w/orders/events/", {"events": events})
        return await waiting

    lines = asyncio.run(run())
    assert sorted(line["read"] for _, line in lines) == list(range(n))
    got = [(took, [d["payload"] for d in line["answer"]["deliveries"]]) for took, line in lines]
    with_events = [payloads for _, payloads in got if payloads]
    assert sorted(with_events) == [["one"], ["two"]]  # each event to one consumer
    # the others waited on until their wait ended, empty: they were not woken to find nothing
    assert [payloads for _, payloads in got[2:]] == [[]] * (n - 2)
    assert min(took for took, payloads in got if not payloads) >= 3.5


def test_many_reads_whose_client_goes_away_hold_nothing(web_server, token):
    http = Http(web_server.url, token)
    make_group("g")

    async def run():
        reads = [{"reader_group": "w/g", "max_events": 1, "wait_ms": WAIT_MS, "consumer": f"c{i}"} for i in range(3)]
        reader, writer = await http.open("POST", "/api/v1/reads/", {"reads": reads})
        await soon()
        writer.close()  # the client goes away mid-wait
        await soon()
        await http.request("POST", "/api/v1/streams/w/orders/events/", {"events": [{"payload": "p"}]})
        return await http.read("w/g", consumer="other", wait_ms=5000)

    _, _, answer = asyncio.run(run())
    assert [(d["payload"], d["delivery_count"]) for d in answer["deliveries"]] == [("p", 1)]


async def restart_then_publish(server: RedisServer, http: Http) -> int:
    """Redis killed and started empty, then an event published once it answers: the publish's
    status."""
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(10)
    server.start()
    for _ in range(20):
        status, _ = await http.request("POST", "/api/v1/streams/w/orders/events/", {"events": [{"payload": "after"}]})
        if status == 201:
            break
        await asyncio.sleep(0.2)
    return status


def test_a_waiting_read_misses_nothing_when_redis_restarts(django_db_setup, tmp_path, settings, token, request):
    # given: a server on a Redis of its own, and a read waiting on it
    server = RedisServer(tmp_path / "redis")
    server.start()
    settings.REDIS_URL = server.url
    web = request.getfixturevalue("web_server")
    try:
        http = Http(web.url, token)
        make_group("g")

        async def run():
            waiting = asyncio.create_task(http.read("w/g"))
            await soon()
            # when: Redis is killed and started empty (the wake-up channel drops with it), and an
            # event is published once it is back
            status = await restart_then_publish(server, http)
            return status, await waiting

        status, (took, read_status, answer) = asyncio.run(run())
    finally:
        server.proc.terminate()
        server.proc.wait(10)
    # then: the read waited through the loss (no 503: Redis was back before its wait ended) and
    # has the event, before its wait ended
    assert status == 201 and read_status == 200, answer
    assert [d["payload"] for d in answer["deliveries"]] == ["after"] and took < WOKEN_WITHIN_S


def test_many_reads_in_one_request_miss_nothing_when_redis_restarts(
    django_db_setup, tmp_path, settings, token, request
):
    # given: a server on a Redis of its own, and two groups' reads waiting in one request
    server = RedisServer(tmp_path / "redis")
    server.start()
    settings.REDIS_URL = server.url
    web = request.getfixturevalue("web_server")
    try:
        http = Http(web.url, token)
        make_group("g")
        make_group("h")

        async def run():
            reads = [{"reader_group": f"w/{name}", "max_events": 1, "wait_ms": WAIT_MS} for name in ("g", "h")]
            waiting = asyncio.create_task(many(http, reads))
            await soon()
            # when: Redis is killed and started empty (the wake-up channel drops with it), and an
            # event is published once it is back
            status = await restart_then_publish(server, http)
            return status, await waiting

        status, lines = asyncio.run(run())
    finally:
        server.proc.terminate()
        server.proc.wait(10)
    # then: both reads waited through the loss and have the event, before their wait ended
    assert status == 201 and sorted(line["read"] for _, line in lines) == [0, 1]
    assert all(line["status"] == 200 for _, line in lines), lines
    assert [[d["payload"] for d in line["answer"]["deliveries"]] for _, line in lines] == [["after"], ["after"]]
    assert max(took for took, _ in lines) < WOKEN_WITHIN_S


def test_a_plain_read_and_cbr_tail_follow_wait_for_a_publish(web_server, token):
    http = Http(web_server.url, token)
    make_stream()
    cbr = Path(sys.executable).parent / "cbr"
    # given: `cbr tail --follow` from the tail, and a plain read waiting, on an empty stream
    tail = subprocess.Popen(
        [str(cbr), "--json", "tail", "w/orders", "--from", "tail", "--follow", "--limit", "1", "--poll-s", "60"],
        env={"PATH": "/usr/bin:/bin", "CBR_SERVER": web_server.url, "CBR_TOKEN": token},
        stdout=subprocess.PIPE,
    )

    async def run():
        waiting = asyncio.create_task(http.request("GET", "/api/v1/streams/w/orders/events/?wait_ms=30000"))
        await soon(2)
        assert not waiting.done()
        started = time.monotonic()
        await http.request("POST", "/api/v1/streams/w/orders/events/", {"events": [{"payload": "tailed"}]})
        return await waiting, time.monotonic() - started

    (status, answer), took = asyncio.run(run())
    # then: both have the event once it is published, long before their waits (or a poll) end
    assert status == 200 and [e["payload"] for e in answer["events"]] == ["tailed"] and took < WOKEN_WITHIN_S
    out, _ = tail.communicate(timeout=WOKEN_WITHIN_S)
    assert [json.loads(line)["payload"] for line in out.decode().splitlines()] == ["tailed"]


def test_a_waiting_read_answered_in_binary_is_woken_with_its_binary_answer(web_server, token):
    make_group("g")
    client = Client(web_server.url, token=token)
    assert client.binary_reads  # the client asks for the binary answer (`Accept: …read-batch`)
    got: list = []
    reader = threading.Thread(target=lambda: got.append(client.reader_group("w/g").read(max_events=5, wait_ms=WAIT_MS)))
    started = time.monotonic()
    reader.start()
    time.sleep(0.5)
    publish(Http(web_server.url, token), [{"payload": "bin"}])
    reader.join(WOKEN_WITHIN_S)
    # then: the woken read's answer is the binary batch (its Content-Type said so), decoded
    assert not reader.is_alive() and [m.text for m in got[0]] == ["bin"]
    assert client.binary_reads and time.monotonic() - started < WOKEN_WITHIN_S
