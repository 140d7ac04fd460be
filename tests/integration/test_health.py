"""`/healthz` and `/readyz` against the real web server, with a real worker and beat that the test
starts and stops, and a Redis of the test's own that it kills (docs/api.md)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from django.db import connection
from faults.test_redis_restarted import own_redis  # noqa: F401

from integration.conftest import ROOT, _database_url

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

STALE_S = "3"


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def wait_for(url: str, check, what: str, log, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status, body = get(url)
        if check(status, body):
            return body
        assert time.monotonic() < deadline, f"{what}: {status} {body}\n{log()}"
        time.sleep(0.3)


def celery(args: list[str], env: dict, log_path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "cbrweb", *args],
        cwd=ROOT,
        env=env,
        stdout=open(log_path, "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def test_healthz_answers_and_readyz_names_what_is_down(own_redis, web_server, tmp_path):  # noqa: F811
    web_server.kill()
    web_server.env["CBR_HEALTH_STALE_S"] = STALE_S
    web_server.start()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "cbrweb.settings",
        "DATABASE_URL": _database_url(connection.settings_dict),
        "REDIS_URL": own_redis.url,
        "CBR_DATA_DIR": web_server.env["CBR_DATA_DIR"],
        "CBR_HEALTH_STALE_S": STALE_S,
        "CBR_COMPACTION_WARM_UP": "0",
    }
    ready = f"{web_server.url}/readyz"
    assert get(f"{web_server.url}/healthz") == (200, {"status": "alive"})
    assert get(f"{web_server.url}/api/v1/healthz") == (200, {"status": "alive"})

    status, body = get(ready)
    assert status == 503
    assert body["down"] == ["workers", "beat"]
    assert body["database"]["ok"] and body["redis"]["ok"]
    assert body["workers"]["queues_without_worker"] == ["celery", "compaction"]
    free = shutil.disk_usage(tmp_path).free  # the data directory is made on the first write
    assert abs(body["data_dir_free_bytes"] - free) < 512 * 1024 * 1024 and body["data_dir"]["ok"]

    worker_log, beat_log = tmp_path / "worker.log", tmp_path / "beat.log"

    def logs():
        return "".join(p.read_text()[-1500:] for p in (worker_log, beat_log) if p.exists())

    worker = celery(["worker", "--pool", "solo", "-Q", "celery", "-n", "only-default@%h"], env, worker_log)
    beat = celery(["beat", "-s", str(tmp_path / "schedule"), "--scheduler", "cbrweb.beat:Scheduler"], env, beat_log)
    compactor = None
    try:
        body = wait_for(ready, lambda s, b: b["beat"]["ok"] and b["workers"]["alive"], "worker and beat", logs)
        assert body["workers"]["queues_without_worker"] == ["compaction"] and body["down"] == ["workers"]
        assert [w["queues"] for w in body["workers"]["alive"]] == [["celery"]]

        compactor = celery(
            ["worker", "--pool", "solo", "-Q", "compaction", "-n", "compactor@%h"], env, tmp_path / "c.log"
        )
        body = wait_for(ready, lambda s, b: s == 200, "every queue served", logs)
        assert body["ready"] and body["down"] == []

        worker.terminate()  # a worker that stops takes its heartbeat with it
        worker.wait(30)
        body = wait_for(ready, lambda s, b: s == 503, "the stopped worker", logs, timeout=10)
        assert body["down"] == ["workers"] and body["workers"]["queues_without_worker"] == ["celery"]

        os.killpg(beat.pid, signal.SIGKILL)  # a beat that dies: its ticks grow stale
        beat.wait(10)
        body = wait_for(ready, lambda s, b: "beat" in b["down"], "the dead beat", logs, timeout=20)
        assert body["beat"]["last_tick_s_ago"] > float(STALE_S)

        own_redis.kill()
        status, body = get(ready)
        assert status == 503 and body["down"] == ["redis"]
        assert body["redis"]["error"].startswith("redis.") and "127.0.0.1" not in json.dumps(body)
        assert body["workers"]["ok"] is None and body["beat"]["ok"] is None
        assert get(f"{web_server.url}/healthz")[0] == 200
    finally:
        for proc in (worker, beat, compactor):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
