"""`make run`: everything a laptop needs, started and stopped together.

Checks the prerequisites, starts an embedded Redis when REDIS_URL is unset, migrates, creates an
admin (its password shown, and kept in var/admin-password until it is changed), seeds the demo on an empty database, then runs the web server
(gunicorn), a Celery worker, the compactor (a worker of the `compaction` queue) and Celery beat
with the database scheduler. Ctrl-C stops all of it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cbrweb import embedded_redis, web
from cbrweb.prereq import java_problem, python_problem

ROOT = Path(__file__).resolve().parent.parent


def say(msg: str) -> None:
    print(f"cbr: {msg}", flush=True)


def main() -> int:
    for problem in (python_problem(), java_problem()):
        if problem:
            print(f"cbr: {problem}", file=sys.stderr)
            return 1
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbrweb.settings")
    var = Path(os.environ.get("CBR_VAR_DIR", ROOT / "var"))
    var.mkdir(parents=True, exist_ok=True)
    children: list[tuple[str, subprocess.Popen]] = []

    url_file = var / "redis.url"  # settings.EMBEDDED_REDIS_URL_FILE
    url_file.unlink(missing_ok=True)  # a run that was killed left it behind
    if not os.environ.get("REDIS_URL"):
        proc, url = start_embedded_redis(var)
        os.environ["REDIS_URL"] = url
        children.append(("redis", proc))
        say(f"embedded Redis at {url} (set REDIS_URL to use your own)")

    py = sys.executable
    manage = [py, str(ROOT / "manage.py")]
    try:
        subprocess.run([*manage, "migrate", "--noinput"], check=True, cwd=ROOT)
        _create_admin(manage)
        _seed_if_empty(manage)
        host = os.environ.get("CBR_HOST", "127.0.0.1")
        port = os.environ.get("CBR_PORT", "8000")
        workers = os.environ.get("CBR_WEB_WORKERS", "2")
        beat_schedule = str(var / "celerybeat-schedule")
        commands = {
            "web": web.command(
                f"{host}:{port}", workers, "--access-logfile", "-", "--graceful-timeout", "5", "--keep-alive", "30"
            ),
            **celery_commands(os.environ.get("CBR_LOG_LEVEL", "INFO").lower(), beat_schedule),
        }
        for name, cmd in commands.items():
            children.append((name, subprocess.Popen(cmd, cwd=ROOT, start_new_session=True)))
        say(f"console and API at http://{host}:{port}/  (API docs: /api/v1/docs/)  Ctrl-C stops")
        return _wait(children)
    except KeyboardInterrupt:
        return 0
    except subprocess.CalledProcessError as exc:
        say(f"set-up step failed: {' '.join(map(str, exc.cmd))}")
        return 1
    finally:
        _stop(children)
        url_file.unlink(missing_ok=True)


def start_embedded_redis(var: Path) -> tuple[subprocess.Popen, str]:
    """The embedded Redis under `var/`, its URL written to `var/redis.url` while it runs, so that
    a command run beside `make run` (its settings read the file) uses the same Redis."""
    proc, url = embedded_redis.start(var / "redis")
    (var / "redis.url").write_text(url + "\n")
    return proc, url


def celery_commands(log_level: str, beat_schedule: str) -> dict[str, list[str]]:
    """The Celery processes of a CBR deployment: the worker of the default queue, the compactor
    (compactions have a queue of their own, so they never hold up retention), and beat."""
    celery = [sys.executable, "-m", "celery", "-A", "cbrweb"]
    return {
        "worker": [*celery, "worker", "-l", log_level, "-c", "1", "-Q", "celery", "-n", "worker@%h"],
        "compactor": [*celery, "worker", "-l", log_level, "-c", "1", "-Q", "compaction", "-n", "compactor@%h"],
        "beat": [
            *celery,
            "beat",
            "-l",
            log_level,
            "--scheduler",
            "cbrweb.beat:Scheduler",
            "-s",
            beat_schedule,
        ],
    }


def _create_admin(manage: list[str]) -> None:
    """The admin, made on a database without a superuser (its password kept under var/ and
    named on every start until it is changed: `access.first_admin`)."""
    subprocess.run([*manage, "first_admin"], check=True, cwd=ROOT)


def _seed_if_empty(manage: list[str]) -> None:
    if os.environ.get("CBR_SEED_DEMO", "1") == "0":
        return
    check = subprocess.run(
        [*manage, "shell", "-c", "from streams.models import Stream; print(Stream.objects.exists())"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    if check.stdout.split()[-1:] == ["False"]:
        say("empty database: loading the demo streams (CBR_SEED_DEMO=0 skips this)")
        subprocess.run([*manage, "seed_demo"], check=True, cwd=ROOT)


def _wait(children) -> int:
    stop = {"now": False}

    def on_signal(signum, frame):
        stop["now"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    while not stop["now"]:
        for name, proc in children:
            if proc.poll() is not None:
                say(f"{name} exited with {proc.returncode}; stopping the rest")
                return proc.returncode or 1
        time.sleep(0.5)
    say("stopping")
    return 0


def stop_stages(children: list[tuple[str, subprocess.Popen]]) -> list[list[tuple[str, subprocess.Popen]]]:
    """The order `_stop` stops them in: the web server first (its graceful timeout lets requests
    in flight end, and they need Redis: stopped with the rest, reads in flight answered 503), then
    beat and the workers, the embedded Redis last, once nothing uses it."""
    stage_of = {"web": 0, "redis": 2}
    stages: list[list[tuple[str, subprocess.Popen]]] = [[], [], []]
    for name, proc in children:
        stages[stage_of.get(name, 1)].append((name, proc))
    return [stage for stage in stages if stage]


def _stop(children) -> None:
    """Each stage signalled, then waited for (`STOP_TIMEOUT_S`), before the next."""
    for stage in stop_stages(children):
        for name, proc in stage:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM) if name != "redis" else proc.terminate()
                except (ProcessLookupError, PermissionError):
                    proc.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for name, proc in stage:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say(f"{name} did not stop in time: killing it")
                proc.kill()
                proc.wait()


STOP_TIMEOUT_S = 15  # each stage of `_stop` (the web server's graceful timeout is 5 s)


if __name__ == "__main__":
    sys.exit(main())
