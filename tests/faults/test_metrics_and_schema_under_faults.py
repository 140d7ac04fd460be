"""`/metrics` and the OpenAPI schema never answer 500: not while PostgreSQL or Redis is down
(`/metrics` is a plain Django view, outside the API's 503 handling: it answered a 500 page), and
not to concurrent first requests on a fresh server (drf-spectacular loads its extensions
lazily, and concurrent first builds of the schema failed each other)."""

import contextlib
import json
import socket
import threading
import urllib.error
import urllib.request

import pytest
from django.db import connection

from cbr_client import Client
from faults.test_redis_restarted import own_redis  # noqa: F401
from streams import services

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


class DatabaseProxy:
    """A TCP proxy in front of PostgreSQL that the test takes down and brings back, for the web
    server only: `down()` cuts every connection through it and refuses new ones."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.up = True
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def down(self):
        self.up = False
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        self.sockets = []

    def close(self):
        self.down()
        self.listener.close()


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.headers["Content-Type"], r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read()


def check_unavailable(answer, code):
    status, content_type, body = answer
    assert status == 503, body[:300]
    assert content_type == "application/json"
    assert json.loads(body)["code"] == code


def test_metrics_answer_503_while_the_database_is_down(web_server, token):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite is a file: it cannot be down")
    settings = connection.settings_dict
    proxy = DatabaseProxy(settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432))
    web_server.kill()
    web_server.env["DATABASE_URL"] = web_server.env["DATABASE_URL"].replace(
        f":{settings['PORT'] or 5432}/", f":{proxy.port}/"
    )
    web_server.start()
    services.do_create_stream(scope="faults", name="metrics")
    try:
        assert get(f"{web_server.url}/metrics")[0] == 200
        proxy.down()
        for _ in range(3):  # a connection cut mid-way, then none to be had
            check_unavailable(get(f"{web_server.url}/metrics"), "database_unavailable")
        proxy.up = True
        status, _, body = get(f"{web_server.url}/metrics")
        assert status == 200 and b'cbr_stream_events{stream="faults/metrics"}' in body
    finally:
        proxy.close()


def test_metrics_answer_503_while_redis_is_down(own_redis, web_server, token):  # noqa: F811
    services.do_create_stream(scope="faults", name="metrics")
    Client(web_server.url, token=token).create_reader_group("faults", "mg", ["faults/metrics"])
    assert get(f"{web_server.url}/metrics")[0] == 200
    own_redis.kill()
    for _ in range(3):
        check_unavailable(get(f"{web_server.url}/metrics"), "redis_unavailable")
    own_redis.start()
    status, _, body = get(f"{web_server.url}/metrics")
    assert status == 200 and b"cbr_reader_group_pending" in body


def test_concurrent_first_schema_requests_on_a_fresh_server_all_succeed(web_server):
    for _ in range(3):  # each round on fresh worker processes
        web_server.kill()
        web_server.start()
        barrier = threading.Barrier(16)
        answers = []

        def fetch():
            barrier.wait()
            answers.append(get(f"{web_server.url}/api/v1/schema/?format=json"))

        threads = [threading.Thread(target=fetch) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [status for status, _, _ in answers] == [200] * 16, [a[2][:200] for a in answers if a[0] != 200][:1]
        assert len({body for _, _, body in answers}) == 1
        assert "/api/v1/streams/" in json.loads(answers[0][2])["paths"]
