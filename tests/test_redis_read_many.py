"""store.redis_connection.read_many: many reads in one round trip, answered as a pipeline answers
them, and a connection that failed mid-way never goes back to the pool with replies unread."""

import pytest
import redis as redis_lib

from store.redis_connection import read_many


@pytest.fixture(params=[2, 3], ids=["RESP2", "RESP3"])
def client(request, redis_url):
    client = redis_lib.Redis.from_url(redis_url, protocol=request.param)
    yield client
    client.delete("cbr:rg:{read-many}:h", "cbr:rg:{read-many}:s")
    client.close()


def test_the_replies_are_a_pipelines(client):
    client.hset("cbr:rg:{read-many}:h", mapping={"floor": 3, "next": 9})
    client.set("cbr:rg:{read-many}:s", b"\xff")
    commands = [
        ("HMGET", "cbr:rg:{read-many}:h", "floor", "missing"),
        ("BITCOUNT", "cbr:rg:{read-many}:s"),
        ("GET", "cbr:rg:{read-many}:nothing"),
        ("ZCARD", "cbr:rg:{read-many}:nothing"),
    ]
    pipe = client.pipeline(transaction=False)
    for name, *args in commands:
        pipe.execute_command(name, *args)

    assert read_many(commands, client) == pipe.execute() == [[b"3", None], 8, None, 0]
    assert read_many([], client) == []


def test_an_error_reply_raises_and_the_connection_is_not_reused_half_read(client):
    client.set("cbr:rg:{read-many}:s", "text")
    client.hset("cbr:rg:{read-many}:h", "left", "over")
    with pytest.raises(redis_lib.ResponseError):
        read_many([("HGETALL", "cbr:rg:{read-many}:s"), ("HGET", "cbr:rg:{read-many}:h", "left")], client)

    # the next reads on the pool get their own replies, not the ones left unread
    assert read_many([("GET", "cbr:rg:{read-many}:s")] * 3, client) == [b"text"] * 3
