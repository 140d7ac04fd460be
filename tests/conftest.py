"""Shared fixtures: a fresh segment store per test, API clients, and the real services (Redis,
a SparkSession) shared across the run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import factories
import pytest
import redis as redis_lib
from django.core.cache import cache
from tier_servers import S3Server

from access.token_cache import CREDENTIALS
from cbrweb import embedded_redis
from cbrweb.celery import app
from groups import consuming
from groups.consuming.floors import GROUPS_READ
from spark_tasks.session import get_spark, stop_spark
from streams import waking
from streams.lookups import PUBLISHED_STREAMS

ROOT = Path(__file__).resolve().parent.parent


# The files that take longest (seconds of one test process, `make test` on 2 cores, 2026-11-29),
# run first, longest first: `make test` hands whole files to its test processes in collection
# order (`--dist loadfile --no-loadscope-reorder`), and a long file taken last runs on alone while
# the other processes have nothing left (xdist's own order, most tests first, put the single-test
# fuzz and soak runs at the very end). The rest follow in their usual order, filling the gaps.
LONG_FILES = {
    "tests/integration/test_spark_cluster.py": 239,
    "tests/fuzz/test_schemathesis.py": 239,
    "tests/integration/test_soak.py": 145,
    "tests/access/test_authorization_matrix.py": 140,
    "tests/compaction/test_transforms.py": 110,
    "tests/integration/test_consume_server.py": 88,
    "tests/compaction/test_runs.py": 78,
    "tests/tiering/test_compaction_reads_tier.py": 76,
    "tests/retention/test_cycle_engines.py": 69,
    "tests/integration/test_waiting_reads.py": 62,
    "tests/faults/test_metrics_and_schema_under_faults.py": 46,
    "tests/storage/test_framing.py": 43,
    "tests/retention/test_cycle.py": 36,
    "tests/faults/test_long_urls.py": 36,
}


def pytest_collection_modifyitems(config, items):
    """The long files first, longest first (`LONG_FILES`); a stable sort keeps each file's tests,
    and the other files, in their order."""
    items.sort(key=lambda item: -LONG_FILES.get(item.nodeid.split("::")[0], 0))


@pytest.fixture(autouse=True)
def data_dir(tmp_path, settings):
    """Every test gets its own segment store directory."""
    settings.CBR_DATA_DIR = tmp_path / "data"
    return settings.CBR_DATA_DIR


def worker_index() -> int:
    """This test process's number when the suite runs in parallel (pytest-xdist's `gw0`, `gw1`,
    …), else 0. `make test` runs at most `MAX_WORKERS` of them."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0


MAX_WORKERS = 6  # Redis databases 0-5 for their state, 15-10 for their Celery messages


def _database_of_worker(url: str, first: int, step: int) -> str:
    """`url` naming the Redis database of this test process: `first`, then `first + step` for
    the next process, and so on."""
    if worker_index() >= MAX_WORKERS:  # their databases would meet: `-n` above it is refused
        raise pytest.UsageError(f"at most {MAX_WORKERS} test processes share a Redis (-n {MAX_WORKERS} or fewer)")
    base, _, db = url.rpartition("/")
    number = first + step * worker_index()
    return f"{base}/{number}" if db.isdigit() else f"{url.rstrip('/')}/{number}"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """REDIS_URL when given (CI: the machine's Redis; a database of its own for each test
    process of a parallel run: the one named, then the next ones), else an embedded
    redis-server (one per test process)."""
    url = os.environ.get("REDIS_URL")
    if url:
        db = url.rpartition("/")[2]
        url = _database_of_worker(url, int(db) if db.isdigit() else 0, 1)
        os.environ["REDIS_URL"] = url  # for what reads it from the environment (servers started)
        yield url
        return
    proc, url = embedded_redis.start(tmp_path_factory.mktemp("redis"))
    yield url
    waking.stop_listener()  # its Redis goes: the process's wake-up listener stops first
    proc.terminate()
    proc.wait(10)


@pytest.fixture(autouse=True)
def redis_state(redis_url, settings):
    """Every test talks to the run's Redis and leaves no reader-group or delayed-index state
    behind. (Not for correctness: the databases roll back between tests and reuse ids, but Redis
    state is named by random keys, never ids, so a new group never meets a stale tracker;
    tests/faults/test_database_rewound.py shows it.)"""
    settings.REDIS_URL = redis_url
    yield
    client = redis_lib.Redis.from_url(redis_url)
    for pattern in ("cbr:acks:*", "cbr:rg:*", "cbr:dl:*", "cbr:retention:*"):
        keys = list(client.scan_iter(match=pattern, count=1000))
        if keys:
            client.delete(*keys)
    client.close()


@pytest.fixture(scope="module")
def redis(redis_url):
    """A client of the run's Redis, one per test module."""
    client = redis_lib.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture(scope="session")
def test_broker(redis_url):
    """Celery messages of the tests travel in a Redis database of their own (15, or
    CBR_TEST_BROKER_DB so that two test runs on one server stay apart; the next test process of
    a parallel run the one below), emptied first, so no other worker on the same server (a
    `make run`, say) takes them."""
    url = _database_of_worker(redis_url, int(os.environ.get("CBR_TEST_BROKER_DB", "15")), -1)
    redis_lib.Redis.from_url(url).flushdb()
    app.conf.broker_url = url
    app.conf.result_backend = url
    # connections an earlier test of this process made (a task queued, a control message) are to
    # the broker it had then: dropped, or the worker's ping would go there and never be answered
    if app._pool is not None:
        app._pool.force_close_all()
        app._pool = None
    if "amqp" in app.__dict__:
        app.amqp._producer_pool = None
    return url


@pytest.fixture
def admin_user(django_user_model):
    return factories.make_user("ada", "admin")


@pytest.fixture
def plain_user(django_user_model):
    """A signed-in user in no role group: a viewer (docs/security.md)."""
    return factories.make_user("bob")


@pytest.fixture
def operator_user(django_user_model):
    return factories.make_user("olga", "operator")


@pytest.fixture
def api(admin_user):
    """An API client authenticated with an admin's token."""
    return factories.api_client(admin_user)


@pytest.fixture
def user_api(plain_user):
    """An API client authenticated with a viewer's token."""
    return factories.api_client(plain_user)


@pytest.fixture
def operator_api(operator_user):
    """An API client authenticated with an operator's token."""
    return factories.api_client(operator_user)


@pytest.fixture
def admin_client(client, admin_user):
    """The console's test client (pytest-django's `client`) signed in as the admin."""
    return factories.console_client(admin_user, client)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """An S3-compatible server (moto's) for the long-term storage tests, started once per test
    process when a test first asks for it; each test takes a bucket of its own."""
    server = S3Server(tmp_path_factory.mktemp("moto") / "moto.log")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole run, built by the project's one builder."""
    session = get_spark(master="local[2]")
    yield session
    stop_spark()


class Clock:
    """The readers' clock, from the real time (publishing stamps and indexes delayed events by
    the real clock) forward as a test moves it."""

    def __init__(self, start: float | None = None):
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    """The clock of leases, delays and delivery times, moved by the test (`clock.now += 60`)."""
    clock = Clock()
    monkeypatch.setattr(consuming.floors, "clock", clock)
    return clock


@pytest.fixture(autouse=True)
def _empty_memos():
    """Each test starts with nothing remembered by the process's memos (`streams.memo`): a test's
    rows are rolled back at its end without the signals that make a memo forget them."""
    PUBLISHED_STREAMS.drop()
    CREDENTIALS.drop()
    GROUPS_READ.drop()


@pytest.fixture(autouse=True)
def _empty_cache():
    """Each test starts with an empty Django cache (the tests' per-process LocMemCache): the
    sign-in failures counted there by one test must not throttle another's sign-in with 429."""
    cache.clear()
