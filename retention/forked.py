"""A few forked worker processes that run numbered tasks of one function, for a retention cycle
spread over the machine's cores (`retention.cycle._run_in_processes`).

Not `multiprocessing` or `concurrent.futures`: a Celery prefork worker's process is daemonic, and
those refuse to start children there; and their workers block on a queue whose other end their
siblings hold, so they outlive a parent killed -9. Here each worker has two pipes of its own: it
reads the next task number from one (and exits at its end: when the parent is done, or dead, it
finishes the task at hand at most) and writes each result, pickled, to the other. A worker that
dies is seen as the end of its result pipe, and fails the whole run.
"""

from __future__ import annotations

import os
import pickle
import selectors
import signal
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

_TASK = struct.Struct("<q")  # a task number; -1 never sent (end of tasks is the pipe's end)
_SIZE = struct.Struct("<Q")


class WorkerDied(RuntimeError):
    """A worker process ended without answering its task (killed, or crashed outside Python)."""


@dataclass
class _Worker:
    pid: int
    tasks: int  # write end: task numbers to the worker
    results: int  # read end: pickled (ok, value) from the worker
    busy: int | None = None  # the task number it works on
    buffer: bytearray = field(default_factory=bytearray)


def run_forked(
    run: Callable[[int], object],
    count: int,
    workers: int,
    on_result: Callable[[int, object], None],
    before_fork: Callable[[], None] = lambda: None,
) -> None:
    """Run `run(i)` for i in range(count) on `workers` forked processes, each taking the next
    task when it finishes one; `on_result(i, value)` in this process as each answer arrives (in
    any order). An exception in a task is raised here (the others' answers are waited for first,
    so that no worker is left working); a worker that dies raises `WorkerDied`. `before_fork` runs
    before each fork (e.g. closing database connections a child must not share)."""
    pool: list[_Worker] = []
    ours: list[int] = []  # this process's pipe ends: a child closes the ones it does not use
    next_task = 0
    failure: BaseException | None = None
    try:
        for _ in range(min(workers, count)):
            before_fork()
            pool.append(_fork(run, ours))
        with selectors.DefaultSelector() as selector:
            for worker in pool:
                selector.register(worker.results, selectors.EVENT_READ, worker)
            for worker in pool:
                if next_task < count:
                    _give(worker, next_task)
                    next_task += 1
            while any(w.busy is not None for w in pool):
                for key, _ in selector.select():
                    worker = key.data
                    answer = _read(worker)
                    if answer is _NOT_YET:
                        continue
                    if answer is _ENDED:
                        selector.unregister(worker.results)
                        failure = failure or WorkerDied(
                            f"retention worker process {worker.pid} died during task {worker.busy}"
                        )
                        worker.busy = None
                        continue
                    task, worker.busy = worker.busy, None
                    ok, value = answer
                    if not ok:
                        failure = failure or value
                    elif failure is None:
                        on_result(task, value)
                    if failure is None and next_task < count:
                        _give(worker, next_task)
                        next_task += 1
    finally:
        for worker in pool:
            _close(worker.tasks)  # the end of its tasks: it exits
        for worker in pool:
            _close(worker.results)
            try:
                os.waitpid(worker.pid, 0)
            except ChildProcessError:
                pass
    if failure is not None:
        raise failure


_NOT_YET = object()
_ENDED = object()


def _fork(run: Callable[[int], object], ours: list[int]) -> _Worker:
    task_r, task_w = os.pipe()
    result_r, result_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 0
        try:
            for fd in (*ours, task_w, result_r):
                _close(fd)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's (a Celery worker's) handlers
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            _serve(run, task_r, result_w)
        except BaseException:
            code = 1
        finally:
            os._exit(code)  # no atexit handlers, no flushing the parent's buffers twice
    _close(task_r)
    _close(result_w)
    ours += [task_w, result_r]
    return _Worker(pid, task_w, result_r)


def _serve(run: Callable[[int], object], tasks: int, results: int) -> None:
    with os.fdopen(tasks, "rb", buffering=0) as source, os.fdopen(results, "wb") as sink:
        while len(raw := _read_exactly(source, _TASK.size)) == _TASK.size:
            (task,) = _TASK.unpack(raw)
            try:
                answer = (True, run(task))
            except Exception as exc:  # sent to the parent, raised there
                answer = (False, _picklable(exc))
            data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
            sink.write(_SIZE.pack(len(data)) + data)
            sink.flush()


def _picklable(exc: Exception) -> Exception:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _read_exactly(source, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = source.read(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _give(worker: _Worker, task: int) -> None:
    worker.busy = task
    try:
        os.write(worker.tasks, _TASK.pack(task))
    except OSError:  # it died: its result pipe's end tells
        pass


def _read(worker: _Worker):
    """What the worker's result pipe holds now: a whole answer, _NOT_YET, or _ENDED."""
    chunk = os.read(worker.results, 1 << 20)
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
