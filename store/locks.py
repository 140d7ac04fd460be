"""Redis locks that a dead holder cannot keep: the retention cycle's per-stream locks, the
compactor's and the delayed index's maintenance locks all take, take over and release through
here. It must never let two live holders share a lock, nor let a release free another holder's.

A lock's value names its holder (`holder_token`: host, boot, pid namespace, pid, and a random
part). A holder on this machine whose process is gone is dead, and its lock is taken over at
once (compare-and-set against the dead holder's token). A holder elsewhere cannot be looked at:
a `Lease` keeps its lock alive by renewing it every third of its time to live from a thread of
its own, so that a holder killed anywhere frees its lock within one time to live; locks taken
for a batch (`take`) simply expire."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.resources import files

from store.boot import BOOT_ID
from store.redis_connection import as_text, get_redis

_LUA = files("store") / "lua"  # read through importlib: the package may be in a zip (a Spark job's)
# the scripts (`lua/lock_*.lua`): take a batch (each key set if free, else its holder returned),
# take over from dead holders (compare-and-set), release (compare-and-delete), renew a lease
_TAKE, _TAKE_OVER, _RELEASE, _RENEW = (
    (_LUA / f"lock_{name}.lua").read_text() for name in ("take", "take_over", "release", "renew")
)


def _this_machine() -> str:
    """Names the process space this process lives in: host, boot, pid namespace. Two lock holders
    with the same name can see each other's processes."""
    try:
        pid_ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pid_ns = "?"
    return f"{socket.gethostname()}/{BOOT_ID.hex()}/{pid_ns}"


def holder_token(task: str | None = None) -> str:
    """A new holder's name: this machine, this process, and a random part (one process may hold
    several locks at once, each with its own token). `task` names a unit of work that may be
    run again elsewhere when its first attempt fails (a Spark task retried on another executor):
    a holder with the same task is an earlier attempt of this one, and its locks are taken over."""
    suffix = f"{uuid.uuid4().hex}@{task}" if task else uuid.uuid4().hex
    return f"{_this_machine()}|{os.getpid()}|{suffix}"


def _task_of(token: str) -> str | None:
    _, at, task = token.rpartition("|")[2].partition("@")
    return task if at else None


def _succeeds(token: str, held_by: str) -> bool:
    """Whether `token` may take a lock from its holder: the holder is dead on this machine, or
    was an earlier attempt of the same task (anywhere)."""
    task = _task_of(token)
    return holder_is_dead(held_by) or (task is not None and _task_of(held_by) == task and held_by != token)


def holder_is_here(token: str) -> bool:
    """Whether the holder is (or was) a process on this machine."""
    return token.partition("|")[0] == _this_machine()


def holder_is_dead(token: str) -> bool:
    """Whether the holder was a process on this machine that no longer exists (a process killed
    -9 never releases its locks). Anything else, or any doubt, counts as alive."""
    machine, _, rest = token.partition("|")
    pid, _, _ = rest.partition("|")
    if machine != _this_machine() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False  # alive (or its pid reused since: the safe mistake)


def _script(source: str):
    return get_redis().register_script(source)


def take(keys: list[str], token: str, ttl_s: float) -> list[bool]:
    """Take these locks for `token` where free, held by a dead holder on this machine, or held by
    an earlier attempt of the token's task (one script call, and one more only when some holder is
    such); whether each was taken."""
    if not keys:
        return []
    ttl_ms = max(1, int(ttl_s * 1000))
    answers = _script(_TAKE)(keys=keys, args=[token, ttl_ms])
    got = [answer == 1 for answer in answers]
    try:
        dead = [
            (i, answer)
            for i, answer in enumerate(answers)
            if isinstance(answer, bytes) and _succeeds(token, answer.decode())
        ]
        if dead:
            taken = _script(_TAKE_OVER)(keys=[keys[i] for i, _ in dead], args=[token, ttl_ms, *[h for _, h in dead]])
            for (i, _), ok in zip(dead, taken):
                got[i] = ok == 1
    except BaseException:
        release([k for k, ok in zip(keys, got) if ok], token)  # nobody else knows of them
        raise
    return got


def release(keys: list[str], token: str) -> None:
    """Release these locks where `token` still holds them."""
    if keys:
        _script(_RELEASE)(keys=keys, args=[token])


def holder(key: str) -> str | None:
    """The live holder of a lock, or None when it is free or its holder is dead."""
    value = get_redis().get(key)
    if value is None:
        return None
    token = as_text(value)
    return None if holder_is_dead(token) else token


class Lease:
    """One lock held for as long as its holder lives: renewed from a thread every third of
    `ttl_s`. `lost` becomes true if the lock was found taken (the holder was paused longer than
    its time to live)."""

    def __init__(self, key: str, ttl_s: float):
        self.key, self.ttl_s = key, ttl_s
        self.token = holder_token()
        self.held = False
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> bool:
        self.held = take([self.key], self.token, self.ttl_s)[0]
        if self.held:
            self._thread = threading.Thread(target=self._renew, name=f"lease {self.key}", daemon=True)
            self._thread.start()
        return self.held

    def _renew(self) -> None:
        renew = _script(_RENEW)
        while not self._stop.wait(self.ttl_s / 3):
            try:
                if not renew(keys=[self.key], args=[self.token, max(1, int(self.ttl_s * 1000))]):
                    self.lost = True
                    return
            except Exception:  # Redis away for a moment: try again at the next beat
                continue

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.held:
            release([self.key], self.token)
            self.held = False


@contextmanager
def lease(key: str, ttl_s: float) -> Iterator[bool]:
    """`Lease` as a context: yields whether the lock was taken; released on leaving."""
    held = Lease(key, ttl_s)
    try:
        yield held.acquire()
    finally:
        held.release()
