"""A manual truncation takes the stream's retention lock, as a cycle does: a cycle reads the
retention set under it and writes the set back whole, so a truncation in between would have the
records it dropped written back (review of the one-row retention set)."""

import threading
from datetime import UTC, datetime, timedelta

import factories
import pytest

from domain.errors import FieldError
from domain.retention import Decision
from retention import locks as retention_locks
from retention import services as retention_services
from retention import set_store
from retention.cycle.applying import apply_batch
from retention.cycle.gathering import prepare_batch
from retention.locks import Locks
from retention.models import TruncationRecord
from store import locks as redis_locks
from store.redis_connection import get_redis
from streams import logs, services

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)
BASE = "/api/v1/streams/shop/orders/"


@pytest.fixture
def stream():
    stream = factories.make_stream(policy={"limit_type": "size", "min": 90, "max": 10_000, "consumption_based": False})
    factories.publish(stream, 7, b"x" * 30)
    rows = [set_store.stored(T0 + timedelta(hours=k), 30 * k, {"0": k}, {"0": 30 * k}) for k in (2, 4, 6)]
    set_store.write_sets({stream.pk: rows})
    return stream


def cuts(stream):
    return [e.cut for e in set_store.entries(stream)]


def test_a_manual_truncation_waits_for_the_cycle_then_drops_its_records(stream, settings):
    settings.CBR_TRUNCATE_LOCK_WAIT_S = 0
    # given a cycle that holds the stream, has read the set and recorded the tail (not yet stored)
    locks = Locks.take([stream])
    assert locks.held == [stream]
    (prepared,) = prepare_batch(locks.held, T0 + timedelta(hours=8), interval=1800)
    # when a manual truncation comes meanwhile, it is refused and changes nothing
    with pytest.raises(FieldError) as refused:
        retention_services.do_truncate(stream, {"0": 5}, rule="manual", trigger="api")
    assert (refused.value.code, refused.value.field) == ("retention_in_progress", "stream_cut")
    assert logs.stream_log(stream).head_cut() == {"0": 0}
    assert not TruncationRecord.objects.exists()
    # then the cycle stores its tail and lets go; the truncation, retried, drops what it passed
    apply_batch([(prepared, Decision(cut=None, rule="none"), [])], T0 + timedelta(hours=8), "test")
    locks.release()
    assert cuts(stream) == [{"0": 2}, {"0": 4}, {"0": 6}, {"0": 7}]
    record = retention_services.do_truncate(stream, {"0": 5}, rule="manual", trigger="api")
    assert record.after_cut == {"0": 5}
    assert cuts(stream) == [{"0": 6}, {"0": 7}]


def test_a_manual_truncation_waits_out_a_short_cycle(stream, settings):
    settings.CBR_TRUNCATE_LOCK_WAIT_S = 5
    locks = Locks.take([stream])
    releaser = threading.Timer(0.3, locks.release)
    releaser.start()
    try:
        record = retention_services.do_truncate(stream, {"0": 3}, rule="manual", trigger="api")
    finally:
        releaser.join()
    assert record.after_cut == {"0": 3}
    assert cuts(stream) == [{"0": 4}, {"0": 6}]
    # and the truncation let go of the lock: a cycle takes it again at once
    again = Locks.take([stream])
    assert again.held == [stream]
    again.release()


def test_the_api_answers_409_naming_the_cut_while_a_cycle_holds_the_stream(api, stream, settings):
    settings.CBR_TRUNCATE_LOCK_WAIT_S = 0
    locks = Locks.take([stream])
    try:
        response = api.post(BASE + "truncate/", {"stream_cut": {"0": 5}}, format="json")
    finally:
        locks.release()
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "retention_in_progress" and body["field"] == "stream_cut"
    assert api.get(BASE).json()["head_cut"] == {"0": 0}
    assert api.post(BASE + "truncate/", {"stream_cut": {"0": 5}}, format="json").status_code == 200
    assert api.get(BASE).json()["head_cut"] == {"0": 5}


def test_a_failure_while_taking_over_a_dead_cycles_locks_lets_go_of_the_batch(stream, monkeypatch):
    other = services.do_create_stream(scope="shop", name="refunds", segment_count=1)
    key = retention_locks._lock_key(other)
    get_redis().set(key, b"elsewhere|1|dead", ex=60)  # another holder's lock (expires: a failed run leaves nothing)

    def redis_went_away(token):
        raise ConnectionError("redis went away")

    try:
        monkeypatch.setattr(redis_locks, "holder_is_dead", redis_went_away)
        with pytest.raises(ConnectionError):
            Locks.take([stream, other])
        monkeypatch.undo()
        # the lock the first call took for `stream` was let go; the other holder's lock was not touched
        again = Locks.take([stream, other])
        assert again.held == [stream]
        again.release()
        assert get_redis().get(key) == b"elsewhere|1|dead"
    finally:
        get_redis().delete(key, retention_locks._lock_key(stream))
