"""The Python client's many reads in one request (`Client.read_many`) against a live server: each
read's Batch as it is answered, a read refused alone, the batches acknowledged as a lone read's
are, and a read that waits answered once a publish comes."""

import threading
import time

import factories
import pytest

from cbr_client import Batch, CBRError, Client, Read

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(live_server, admin_user):
    with Client(live_server.url, token=factories.token_for(admin_user)) as c:
        yield c


def test_many_reads_answer_a_batch_each_and_a_refusal_alone(client):
    client.create_stream("shop", "orders")
    client.publish("shop/orders", ["a", "b", "c"])
    client.create_reader_group("shop", "billing", ["shop/orders"], ack_policy="explicit", start="head")
    client.create_reader_group("shop", "audit", ["shop/orders"], start="head")

    answers = dict(
        client.read_many(
            [
                Read("shop/billing", max_events=2, consumer="one"),
                Read("shop/nobody", max_events=1),
                Read("shop/audit", max_events=10),
                Read("shop/billing", max_events=10, consumer="two"),
            ]
        )
    )

    assert sorted(answers) == [0, 1, 2, 3]
    assert isinstance(answers[1], CBRError) and answers[1].status == 404
    assert [m.text for m in answers[0]] + [m.text for m in answers[3]] == ["a", "b", "c"]
    assert [m.text for m in answers[2]] == ["a", "b", "c"]
    billing = client.reader_group("shop/billing")
    assert isinstance(answers[0], Batch) and billing.ack(answers[0])["acked"] == 2
    assert billing.ack(answers[3])["acked"] == 1


def test_a_read_of_many_that_waits_is_answered_after_the_others_once_a_publish_comes(client):
    client.create_stream("shop", "orders")
    client.create_reader_group("shop", "billing", ["shop/orders"], start="tail")
    client.create_reader_group("shop", "audit", ["shop/orders"], start="tail")
    publisher = threading.Timer(0.5, lambda: client_for_publish(client).publish("shop/orders", ["late"]))
    started = time.monotonic()
    publisher.start()
    try:
        answered = list(client.read_many([Read("shop/billing", wait_ms=30_000), Read("shop/audit", wait_ms=0)]))
    finally:
        publisher.join()
    assert [n for n, _ in answered] == [1, 0]  # the read that does not wait first
    assert list(answered[0][1]) == [] and [m.text for m in answered[1][1]] == ["late"]
    assert time.monotonic() - started < 25


def client_for_publish(client: Client) -> Client:
    """A client of its own for another thread (a client's connection is not shared)."""
    return Client(f"{client._scheme}://{client._netloc}", token=client.token)
