"""A few forked worker processes that run tasks of one function, for a retention cycle spread over
the machine's cores (`retention.cycle`: the local engine, and the Spark engine's gathering and
applying).

Not `multiprocessing` or `concurrent.futures`: a Celery prefork worker's process is daemonic, and
those refuse to start children there; and their workers block on a queue whose other end their
siblings hold, so they outlive a parent killed -9. Here each worker has two pipes of its own: it
reads its next task from one (and exits at its end: when the parent is done, or dead, it finishes
the task at hand at most) and writes each answer to the other. Tasks and answers travel pickled,
length-prefixed. A worker that dies is seen as the end of its answer pipe, and fails the run.

A worker lives as long as its `Pool`, so what a task leaves in the worker's memory is there for
the next task sent to that worker (`run(..., worker_of=...)` picks the worker of each task).
"""

from __future__ import annotations

import os
import pickle
import selectors
import signal
import struct
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

_SIZE = struct.Struct("<Q")

Task = TypeVar("Task")
Answer = TypeVar("Answer")


class WorkerDied(RuntimeError):
    """A worker process ended without answering its task (killed, or crashed outside Python)."""


@dataclass
class _Worker:
    index: int
    pid: int
    tasks: int  # write end: pickled tasks to the worker
    answers: int  # read end: pickled (ok, value) from the worker
    busy: int | None = None  # the number of the task it works on
    buffer: bytearray = field(default_factory=bytearray)
    alive: bool = True


class Pool(Generic[Task, Answer]):
    """`workers` forked processes, each calling `handle(task)` for the tasks sent to it."""

    def __init__(
        self,
        handle: Callable[[Task], Answer],
        workers: int,
        before_fork: Callable[[], None] = lambda: None,
        at_exit: Callable[[], None] = lambda: None,
    ):
        """`at_exit` runs in each worker when its tasks end (the pool closed, or this process
        gone), e.g. to release what the worker still holds."""
        self._workers: list[_Worker] = []
        self._broken = False
        ours: list[int] = []  # this process's pipe ends: a child closes the ones it does not use
        try:
            for index in range(workers):
                before_fork()  # e.g. close database connections a child must not share
                self._workers.append(_fork(index, handle, at_exit, ours))
        except BaseException:
            self.close()
            raise

    @property
    def size(self) -> int:
        return len(self._workers)

    def run(
        self,
        tasks: Sequence[Task],
        on_answer: Callable[[int, Answer], None],
        worker_of: Callable[[int], int] | None = None,
    ) -> None:
        """Send each task to a worker (the next free one, or `worker_of(i)`'s in their order) and
        call `on_answer(i, value)` here as answers arrive, in any order. An exception in a task
        is raised here once the tasks already sent have answered (no worker is left working);
        a worker that died raises `WorkerDied`; either way no further task is sent."""
        dead = [w.pid for w in self._workers if not w.alive]
        if dead:  # what it held in memory is gone
            raise WorkerDied(f"retention worker process {dead[0]} died in an earlier run of this pool")
        if self._broken:  # answers of an interrupted run may still be on their way
            raise RuntimeError("an earlier run of this pool was interrupted")
        self._broken = True
        queues: list[list[int]] = [[] for _ in self._workers]
        shared: list[int] = []
        for i in range(len(tasks)):
            (shared if worker_of is None else queues[worker_of(i) % len(self._workers)]).append(i)
        shared.reverse()
        for q in queues:
            q.reverse()
        failure: BaseException | None = None

        def give(worker: _Worker) -> None:
            source = queues[worker.index] or shared
            if failure is None and worker.alive and source:
                i = source.pop()
                worker.busy = i
                if not _send(worker.tasks, tasks[i]):
                    worker.alive = False  # its answer pipe's end says why

        with selectors.DefaultSelector() as selector:
            for worker in self._workers:
                if worker.alive:
                    selector.register(worker.answers, selectors.EVENT_READ, worker)
                    give(worker)
            while any(w.busy is not None for w in self._workers):
                for key, _ in selector.select():
                    worker = key.data
                    answer = _read(worker)
                    if answer is _NOT_YET:
                        continue
                    task, worker.busy = worker.busy, None
                    if answer is _ENDED:
                        selector.unregister(worker.answers)
                        worker.alive = False
                        failure = failure or WorkerDied(
                            f"retention worker process {worker.pid} died during task {task}"
                        )
                        continue
                    ok, value = answer
                    if not ok:
                        failure = failure or value
                    elif failure is None:
                        on_answer(task, value)
                    give(worker)
        self._broken = False  # every answer sent for has arrived
        if failure is not None:
            raise failure

    def close(self) -> None:
        """End every worker (the end of its task pipe) and wait for it."""
        for worker in self._workers:
            _close(worker.tasks)  # the end of its tasks: it exits
        for worker in self._workers:
            _close(worker.answers)
            try:
                os.waitpid(worker.pid, 0)
            except ChildProcessError:
                pass
        self._workers = []

    def __enter__(self) -> Pool[Task, Answer]:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_forked(
    run: Callable[[int], Answer],
    count: int,
    workers: int,
    on_result: Callable[[int, Answer], None],
    before_fork: Callable[[], None] = lambda: None,
    at_exit: Callable[[], None] = lambda: None,
) -> None:
    """Run `run(i)` for i in range(count) on `workers` forked processes, each taking the next
    task when it finishes one; `on_result(i, value)` here as each answer arrives (`Pool.run`)."""
    with Pool(run, min(workers, count), before_fork=before_fork, at_exit=at_exit) as pool:
        pool.run(range(count), on_result)


_NOT_YET = object()
_ENDED = object()


def _keep_py4j_sockets_in_children() -> None:
    """A forked child loses every thread but one, and with them their thread-local storage; py4j
    (PySpark's bridge to the JVM) closes a thread's connection when that storage goes, with a
    socket `shutdown`, which ends the connection for the parent too (the JVM resets it). From the
    first fork on, py4j's shutdown acts only in the process that forked; a child merely closes its
    copy of the descriptor."""
    for name in ("py4j.java_gateway", "py4j.clientserver"):
        module = sys.modules.get(name)
        original = getattr(module, "quiet_shutdown", None)
        if module is None or original is None or getattr(original, "cbr_parent", None) is not None:
            continue
        setattr(module, "quiet_shutdown", _ParentsShutdown(original))  # a module found by name: typed as any module


class _ParentsShutdown:
    """py4j's `quiet_shutdown(sock)` that acts only in the process `cbr_parent`."""

    def __init__(self, original: Callable[[Any], object]):
        self.original = original
        self.cbr_parent = os.getpid()

    def __call__(self, sock: Any) -> None:
        if os.getpid() == self.cbr_parent:
            self.original(sock)


def _fork(index: int, handle: Callable[[Any], object], at_exit: Callable[[], None], ours: list[int]) -> _Worker:
    task_r, task_w = os.pipe()
    answer_r, answer_w = os.pipe()
    _keep_py4j_sockets_in_children()
    pid = os.fork()
    if pid == 0:  # the child
        code = 0
        try:
            for fd in (*ours, task_w, answer_r):
                _close(fd)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's (a Celery worker's) handlers
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            try:
                _serve(handle, task_r, answer_w)
            finally:
                at_exit()
        except BaseException:
            code = 1
        finally:
            os._exit(code)  # no atexit handlers, no flushing the parent's buffers twice
    _close(task_r)
    _close(answer_w)
    ours += [task_w, answer_r]
    return _Worker(index, pid, task_w, answer_r)


def _serve(handle: Callable[[Any], object], tasks: int, answers: int) -> None:
    with os.fdopen(tasks, "rb") as source:
        while (size := _read_exactly(source, _SIZE.size)) is not None:
            task = pickle.loads(_read_exactly(source, _SIZE.unpack(size)[0]) or b"")
            try:
                answer = (True, handle(task))
                pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # sent to the parent, raised there
                answer = (False, _picklable(exc))
            if not _send(answers, answer):
                return


def _send(fd: int, value: object) -> bool:
    """Write `value` pickled and length-prefixed, whole; False if the other end is gone."""
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_SIZE.pack(len(data)) + data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        return False
    return True


def _picklable(exc: Exception) -> Exception:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _read_exactly(source, size: int) -> bytes | None:
    """`size` bytes, or None at the end of the pipe (before or within them)."""
    data = source.read(size) if size else b""
    return data if len(data) == size else None


def _read(worker: _Worker):
    """What the worker's answer pipe holds now: a whole answer, _NOT_YET, or _ENDED."""
    chunk = os.read(worker.answers, 1 << 20)
    if not chunk:
        return _ENDED
    worker.buffer += chunk
    if len(worker.buffer) < _SIZE.size:
        return _NOT_YET
    (size,) = _SIZE.unpack_from(worker.buffer)
    if len(worker.buffer) < _SIZE.size + size:
        return _NOT_YET
    answer = pickle.loads(bytes(worker.buffer[_SIZE.size : _SIZE.size + size]))
    del worker.buffer[: _SIZE.size + size]
    return answer


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def chunks(total: int, size: int) -> Sequence[tuple[int, int]]:
    """[start, end) ranges of `size` covering range(total)."""
    return [(start, min(start + size, total)) for start in range(0, total, size)]
