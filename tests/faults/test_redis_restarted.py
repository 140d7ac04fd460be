"""Redis restarted empty (killed, down for a moment, started again without persistence) while a
consumer reads and acknowledges through the real web server. A dedicated redis-server on its own
port, never the machine's shared one.

After each restart: everything at or above the persisted floor is handed out again, nothing
below it is; a request while Redis is down fails cleanly (503 JSON); in the end every event was
processed, nothing acknowledged is lost, floors never went back and reach the tails. The consumer
pauses between requests for each restart, so that the floors sampled then are exactly the ones
the new Redis starts from (an ack in flight may still write its floor after Redis went).
"""

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cbr_client import CBRError, Client
from cbrweb import embedded_redis
from domain.events import EventIn
from faults.invariants import check_floors_never_regress, floors
from streams import logs, services

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PER_SEGMENT = 2000


class RedisServer:
    def __init__(self, workdir):
        self.workdir = workdir
        self.port = embedded_redis.free_port()
        self.proc = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        self.proc, _ = embedded_redis.start(self.workdir, self.port)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def own_redis(tmp_path, settings):
    server = RedisServer(tmp_path / "redis")
    server.start()
    settings.REDIS_URL = server.url  # the web server started after this uses it
    yield server
    if server.proc.poll() is None:
        server.proc.terminate()
        server.proc.wait(10)


def test_redis_restarted_empty_redelivers_from_the_persisted_floor_and_loses_nothing(own_redis, web_server, token):
    stream = services.do_create_stream(scope="faults", name="redis", segment_count=2)
    log = logs.stream_log(stream)
    for seg in stream.segment_ids:
        key = next(k for k in (f"k{i}".encode() for i in range(1000)) if log.route(k) == seg)
        services.do_publish(stream, [EventIn(f"{seg}:{i}".encode(), routing_key=key) for i in range(PER_SEGMENT)])
    Client(web_server.url, token=token).create_reader_group(
        "faults",
        "rg",
        ["faults/redis"],
        retention_type="AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT",
        ack_timeout_s=30,
        max_ack_pending=10_000,
    )
    deliveries: list[tuple[float, str, int]] = []  # (when the read was sent, segment, offset)
    processed: set = set()
    errors: list = []
    lost: list = []  # refusals of acks sent across a restart
    stop, pause, idle, resume = threading.Event(), threading.Event(), threading.Event(), threading.Event()

    def consume():
        with Client(web_server.url, token=token, timeout=10, retry_for_s=0) as cbr:
            group = cbr.reader_group("faults/rg")
            held = []
            while not stop.is_set():
                if pause.is_set():  # between requests: the test restarts Redis now
                    idle.set()
                    resume.wait(30)
                    resume.clear()
                sent = time.monotonic()
                try:
                    batch = group.read(max_events=40)
                    deliveries.extend((sent, m.data["segment"], m.data["offset"]) for m in batch)
                    processed.update((m.data["segment"], m.data["offset"]) for m in batch)
                    # out of order: a batch's first delivery is acknowledged with the next batch,
                    # so acknowledgements always sit above the floor when Redis goes. The held one
                    # goes first: after a restart the new batch may hold its event again, and
                    # acking that first could move the floor past it (an old id below the floor
                    # is taken as already processed, not refused)
                    try:
                        group.ack(held)
                    except CBRError as err:  # after a restart: a lease that went with Redis
                        if err.code != "lease_lost":
                            raise
                        lost.append(err.body["refused"])
                    group.ack(batch[1:])
                    held = batch[:1]
                except CBRError as err:
                    errors.append((err.status, err.body))
                except OSError as err:
                    errors.append(repr(err))

    thread = threading.Thread(target=consume)
    thread.start()
    samples = [floors()]
    restarts = []  # (when the post-restart epoch began, the floors persisted then)
    cbr = Client(web_server.url, token=token, retry_for_s=0)
    for n in range(2):
        deadline = time.monotonic() + 20
        while min(floors().values()) < 300 * (n + 1) and time.monotonic() < deadline:
            time.sleep(0.05)
        pause.set()
        assert idle.wait(30)  # no request in flight: the floors below are final for this epoch
        idle.clear()
        pause.clear()
        own_redis.kill()  # everything in Redis is gone: leases, acks above the floor
        with pytest.raises(CBRError) as down:  # a reader-group step needs Redis: a clean 503
            cbr.reader_group("faults/rg").read(max_events=5)
        assert (down.value.status, down.value.code) == (503, "redis_unavailable"), down.value.body
        samples.append(floors())
        restarts.append((time.monotonic(), samples[-1]))  # reads sent from now on meet the new Redis
        own_redis.start()
        resume.set()
        samples.append(floors())
    deadline = time.monotonic() + 60
    tails = log.tail_cut()
    while time.monotonic() < deadline and {s: f for (_, _, s), f in floors().items()} != tails:
        samples.append(floors())
        time.sleep(0.2)
    stop.set()
    thread.join(30)
    samples.append(floors())

    assert not errors, errors[:5]
    # the held acks sent right after each restart were refused (their leases went with Redis),
    # never taken for the new holder's deliveries
    assert 1 <= len(lost) <= 2 and all(r["reason"] in ("lost", "stale") for refused in lost for r in refused), lost
    assert processed == {(s, o) for s in stream.segment_ids for o in range(PER_SEGMENT)}  # nothing lost
    check_floors_never_regress(samples)
    assert {s: f for (_, _, s), f in samples[-1].items()} == tails
    for began, floor_then in restarts:
        floor_then = {s: f for (_, _, s), f in floor_then.items()}
        assert all(0 < f < PER_SEGMENT for f in floor_then.values()), floor_then  # it came mid-run
        after = {(s, o) for sent, s, o in deliveries if sent > began}
        for seg, floor in floor_then.items():
            assert not {o for s, o in after if s == seg and o < floor}, f"{seg}: handed out below the floor {floor}"
            missing = {o for o in range(floor, PER_SEGMENT)} - {o for s, o in after if s == seg}
            assert not missing, f"{seg}: not handed out again after the restart: {sorted(missing)[:10]}"
    again = len(deliveries) - len(processed)
    assert again > 0  # acknowledged above the floor, then lost with Redis: handed out again
    print(f"redis restarted twice: {len(deliveries)} deliveries, {again} handed out again, floors {samples[-1]}")


def test_cbr_consume_waits_out_a_redis_outage_as_the_server_says(own_redis, web_server, token):
    """`cbr consume` started while Redis is down: its reads answer 503 `redis_unavailable` with
    `Retry-After`; the client sends them again, backing off, and once Redis is back the consumer
    gets every event and ends as asked, having said on stderr that it waited."""
    stream = services.do_create_stream(scope="faults", name="outage", segment_count=1)
    Client(web_server.url, token=token).create_reader_group("faults", "og", ["faults/outage"], retention_type="NONE")
    services.do_publish(stream, [EventIn(f"e{i}".encode()) for i in range(20)])
    own_redis.kill()
    consumer = subprocess.Popen(
        [str(Path(sys.executable).parent / "cbr"), "consume", "faults/og", "--count", "20", "--max", "7"],
        env={"PATH": "/usr/bin:/bin", "CBR_SERVER": web_server.url, "CBR_TOKEN": token},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd="/",
    )
    time.sleep(2.5)  # refused and waiting to send again
    assert consumer.poll() is None, consumer.communicate()
    own_redis.start()
    out, err = consumer.communicate(timeout=60)
    assert consumer.returncode == 0, err.decode()
    assert [line.split()[-1] for line in out.decode().splitlines()] == [f"e{i}" for i in range(20)]
    assert "answered 503: sent again in 1.0 s" in err.decode()
