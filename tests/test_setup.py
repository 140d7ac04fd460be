"""The service's set-up: settings from the environment, prerequisite checks, embedded Redis,
the production check."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

from cbrweb import embedded_redis, run
from cbrweb.celery import app
from cbrweb.env import env_bool, env_choice, env_int
from cbrweb.run import celery_commands, start_embedded_redis

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "reader, raw",
    [
        (lambda: env_int("CBR_X", 1, minimum=1), "ten"),
        (lambda: env_int("CBR_X", 1, minimum=1), "0"),
        (lambda: env_bool("CBR_X", False), "maybe"),
        (lambda: env_choice("CBR_X", "batch", ("batch", "never")), "sometimes"),
    ],
)
def test_a_bad_environment_value_is_refused_naming_the_variable(monkeypatch, reader, raw):
    monkeypatch.setenv("CBR_X", raw)
    with pytest.raises(ImproperlyConfigured, match="CBR_X"):
        reader()


def test_settings_refuse_an_unknown_database_url_and_fsync_mode():
    for env in ({"DATABASE_URL": "mysql://x/y"}, {"CBR_FSYNC": "sometimes"}):
        out = subprocess.run(
            [sys.executable, "-c", "import django; from django.conf import settings; settings.INSTALLED_APPS"],
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "cbrweb.settings", **env},
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert out.returncode != 0
        assert next(iter(env)) in out.stderr


def test_a_missing_java_is_said_in_a_sentence(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "cbrweb.prereq"],
        env={**os.environ, "PATH": str(tmp_path)},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1
    assert "Java 17 or newer is needed" in out.stderr and "Traceback" not in out.stderr


def test_the_embedded_redis_starts_and_answers(tmp_path):
    proc, url = embedded_redis.start(tmp_path / "redis")
    try:
        client = redis.Redis.from_url(url)
        client.set("k", "v")
        assert client.get("k") == b"v"
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_embedded_redis_has_a_session_of_its_own_so_ctrl_c_stops_the_workers_first(tmp_path):
    proc, _ = embedded_redis.start(tmp_path / "redis")
    try:
        assert os.getsid(proc.pid) == proc.pid != os.getsid(0)  # the terminal's SIGINT does not reach it
    finally:
        proc.terminate()
        proc.wait(10)


def settings_value(name: str, env: dict) -> str:
    out = subprocess.run(
        [sys.executable, "-c", f"import django; from django.conf import settings; print(settings.{name})"],
        env={
            **{k: v for k, v in os.environ.items() if k != "REDIS_URL"},
            "DJANGO_SETTINGS_MODULE": "cbrweb.settings",
            **env,
        },
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_a_command_beside_make_run_finds_its_embedded_redis(tmp_path):
    # given `make run`'s var/ with the Redis it started
    proc, url = start_embedded_redis(tmp_path)
    try:
        assert (tmp_path / "redis.url").read_text() == url + "\n"
        # then settings in any other process on that var/ use it
        assert settings_value("REDIS_URL", {"CBR_VAR_DIR": str(tmp_path)}) == url
        assert settings_value("CELERY_BROKER_URL", {"CBR_VAR_DIR": str(tmp_path)}) == url
    finally:
        proc.terminate()
        proc.wait(10)
    # and REDIS_URL still wins
    mine = {"CBR_VAR_DIR": str(tmp_path), "REDIS_URL": "redis://10.0.0.9:6379/2"}
    assert settings_value("REDIS_URL", mine) == "redis://10.0.0.9:6379/2"
    # and without `make run` the machine's Redis
    (tmp_path / "redis.url").unlink()
    assert settings_value("REDIS_URL", {"CBR_VAR_DIR": str(tmp_path)}) == "redis://127.0.0.1:6379/0"


def test_the_documented_production_settings_pass_the_deploy_check(settings):
    settings.DEBUG = False
    settings.SECRET_KEY = "a-long-random-production-secret-" + "x" * 40
    settings.ALLOWED_HOSTS = ["cbr.example.com"]
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = settings.SECURE_HSTS_PRELOAD = True
    call_command("check", deploy=True, fail_level="WARNING")


def test_compactions_have_their_own_queue_and_periodic_ticks_expire_by_the_next(settings):
    """A compaction (a Spark job of minutes) must not take the slots retention, checkpoints and
    delayed maintenance run in (the soak saw retention stall behind two of them); a tick no worker
    started before the next one is dropped rather than queued up."""

    def queue(task: str) -> str:
        return app.amqp.router.route({}, task)["queue"].name

    assert queue("compaction.tasks.compact_due_streams") == queue("compaction.tasks.run_compaction") == "compaction"
    assert {
        queue(t)
        for t in (
            "retention.tasks.run_retention_cycle",
            "groups.tasks.periodic_checkpoints",
            "streams.tasks.delayed_maintenance",
            "streams.tasks.seal_due_chunks",
        )
    } == {"celery"}
    for name, entry in settings.CELERY_BEAT_SCHEDULE.items():
        assert entry["options"]["expire_seconds"] == max(1, int(entry["schedule"])), name
    started = celery_commands("info", "schedule")  # what make run and the soak start
    queues = [cmd[cmd.index("-Q") + 1] for cmd in started.values() if "-Q" in cmd]
    assert sorted(queues) == ["celery", "compaction"] and "beat" in started


CHILD = """
import signal, sys, time
name, log, linger = sys.argv[1], sys.argv[2], float(sys.argv[3])
def on_term(*_):
    with open(log, "a") as f:
        f.write(f"{name} told {time.monotonic()}\\n")
    time.sleep(linger)  # a graceful stop: requests in flight end
    with open(log, "a") as f:
        f.write(f"{name} gone {time.monotonic()}\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
while True:
    time.sleep(0.05)
"""


def test_stopping_make_run_stops_the_web_server_before_the_workers_and_redis_last(tmp_path):
    # given make run's children, the web server taking a while to end its requests in flight
    log = tmp_path / "log"
    children = []
    for name, linger in (("redis", 0), ("web", 0.6), ("worker", 0.2), ("beat", 0)):
        proc = subprocess.Popen([sys.executable, "-c", CHILD, name, str(log), str(linger)], start_new_session=True)
        children.append((name, proc))
    time.sleep(0.5)  # their handlers set

    # when they are stopped
    run._stop(children)

    # then Redis was told to stop only once the web server and the workers had gone
    told = {}
    gone = {}
    for line in log.read_text().splitlines():
        name, what, at = line.split()
        (told if what == "told" else gone)[name] = float(at)
    assert set(gone) == {"redis", "web", "worker", "beat"}
    assert told["worker"] >= gone["web"] and told["beat"] >= gone["web"]
    assert told["redis"] >= max(gone["web"], gone["worker"], gone["beat"])
