"""A web process's counters carried into Redis (`streams.wait_stats.flush`), against the run's
real Redis: other hashes' counts (each reader group consumer's deliveries and acknowledgements)
arrive whole and with their expiry however many hashes were counted into, and arrive after a
Redis that forgot the script."""

import uuid

import pytest
import redis as redis_lib

from streams import wait_stats


def _count_into(run: str, keys: int) -> None:
    for i in range(keys):
        wait_stats.counts.add_to(f"{run}:consumers:{i}", "n_delivered:c1", i + 1)
        wait_stats.counts.add_to(f"{run}:consumers:{i}", "n_acked:c1", 1)
        wait_stats.counts.add_to(f"{run}:window:{i}", "delivered:c1", 2, expire_s=120)


def test_counts_into_more_hashes_than_one_call_takes_arrive_whole_with_their_expiry(redis_url):
    client, run = redis_lib.Redis.from_url(redis_url), f"t{uuid.uuid4().hex}"
    keys = wait_stats.KEYS_A_CALL * 2 + 7  # three calls' worth of each kind of hash
    _count_into(run, keys)
    wait_stats.flush(client, 3)
    _count_into(run, keys)  # counted again after the first flush: added to what is there
    wait_stats.flush(client, 3)

    for i in (0, 1, wait_stats.KEYS_A_CALL, keys - 1):
        assert client.hgetall(f"{run}:consumers:{i}") == {
            b"n_delivered:c1": str(2 * (i + 1)).encode(),
            b"n_acked:c1": b"2",
        }
        assert client.ttl(f"{run}:consumers:{i}") == -1  # a consumer's totals never expire
        assert client.hgetall(f"{run}:window:{i}") == {b"delivered:c1": b"4"}
        assert 0 < client.ttl(f"{run}:window:{i}") <= 120
    assert sum(1 for _ in client.scan_iter(f"{run}:consumers:*", count=1000)) == keys
    assert client.hget(wait_stats.WAITING_KEY, wait_stats.PROCESS).split()[0] == b"3"


def test_counts_arrive_after_redis_forgot_the_script(redis_url):
    client, run = redis_lib.Redis.from_url(redis_url), f"t{uuid.uuid4().hex}"
    _count_into(run, 2)
    wait_stats.flush(client, None)
    client.script_flush()  # as a restarted Redis would have
    _count_into(run, 2)
    wait_stats.flush(client, None)

    assert client.hgetall(f"{run}:consumers:1") == {b"n_delivered:c1": b"4", b"n_acked:c1": b"2"}
    assert client.hget(f"{run}:window:0", "delivered:c1") == b"4"


def test_fields_set_arrive_with_the_counts_the_last_set_winning(redis_url):
    client, run = redis_lib.Redis.from_url(redis_url), f"t{uuid.uuid4().hex}"
    wait_stats.counts.add_to(f"{run}:consumers", "nr:c1", 2)
    wait_stats.counts.set_in(f"{run}:consumers", "w:c1", "10.0 40.0")
    wait_stats.counts.set_in(f"{run}:consumers", "w:c1", "11.0 41.0")  # its next wait, before a flush
    wait_stats.counts.set_in(f"{run}:other", "w:c2", "=5")  # a value may start with anything
    wait_stats.flush(client, None)

    assert client.hgetall(f"{run}:consumers") == {b"nr:c1": b"2", b"w:c1": b"11.0 41.0"}
    assert client.hgetall(f"{run}:other") == {b"w:c2": b"=5"}


def test_fields_set_are_set_again_after_a_failed_flush_unless_set_anew(redis_url):
    client, run = redis_lib.Redis.from_url(redis_url), f"t{uuid.uuid4().hex}"
    wait_stats.counts.set_in(f"{run}:consumers", "w:c1", "10.0 40.0")
    wait_stats.counts.set_in(f"{run}:consumers", "w:c2", "10.0 40.0")
    gone = redis_lib.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)  # nothing listens there
    with pytest.raises(redis_lib.ConnectionError):
        wait_stats.flush(gone, None)
    wait_stats.counts.set_in(f"{run}:consumers", "w:c2", "12.0 42.0")  # set anew meanwhile
    wait_stats.flush(client, None)

    assert client.hgetall(f"{run}:consumers") == {b"w:c1": b"10.0 40.0", b"w:c2": b"12.0 42.0"}
