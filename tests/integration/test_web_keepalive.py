"""The web server closes a keep-alive connection after CBR_WEB_KEEPALIVE_REQUESTS requests
(cbrweb/gunicorn_conf.py), and clients carry on over a new one without losing or repeating work."""

import http.client

import factories
import pytest

from cbr_client import Client

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def three_requests_per_connection(monkeypatch):
    monkeypatch.setenv("CBR_WEB_KEEPALIVE_REQUESTS", "3")  # read by the web_server fixture's environment


@pytest.fixture
def token(django_user_model):
    return factories.token_for(factories.make_user("ka", "admin"))


def test_every_third_answer_on_a_connection_closes_it(three_requests_per_connection, web_server, token):
    conn = http.client.HTTPConnection("127.0.0.1", web_server.port, timeout=10)
    said, ports = [], []
    for _ in range(7):
        conn.request("GET", "/api/v1/streams/", headers={"Authorization": f"Token {token}"})
        ports.append(conn.sock.getsockname()[1])
        response = conn.getresponse()
        response.read()
        assert response.status == 200
        said.append(response.getheader("Connection", "keep-alive"))  # HTTP/1.1 keeps it unless told
    conn.close()
    assert said == ["keep-alive", "keep-alive", "close"] * 2 + ["keep-alive"]
    # three requests on each connection, then a new one (a new local port)
    assert ports[0] == ports[1] == ports[2] != ports[3] == ports[4] == ports[5] != ports[6]


def test_the_client_reconnects_and_publishes_each_batch_once(three_requests_per_connection, web_server, token):
    client = Client(web_server.url, token=token)
    client.create_stream("ka", "s")
    for i in range(10):  # publishes are never retried: a close it did not expect would raise
        client.publish("ka/s", [f"e{i}"])
    events = client.request("GET", "streams/ka/s/events/?limit=100")
    assert [e["payload"] for e in events["events"]] == [f"e{i}" for i in range(10)]
