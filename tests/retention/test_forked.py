"""retention.forked: tasks on forked worker processes, without Django."""

import logging
import os
import signal
import threading

import pytest

from retention.forked import Pool, WorkerDied, chunks, run_forked


def collect(run, count, workers):
    got = {}
    run_forked(run, count, workers, lambda i, value: got.__setitem__(i, value))
    return got


def test_every_task_runs_once_in_a_worker_and_its_answer_comes_back():
    parent = os.getpid()
    got = collect(lambda i: (i * i, os.getpid(), "x" * (i * 300_000)), 7, 3)  # answers up to 1.8 MB
    assert sorted(got) == list(range(7))
    assert all(got[i][0] == i * i and len(got[i][2]) == i * 300_000 for i in got)
    pids = {pid for _, pid, _ in got.values()}
    assert parent not in pids and 1 <= len(pids) <= 3


def test_no_more_workers_than_tasks_and_none_left_behind():
    got = collect(lambda i: os.getpid(), 2, 8)
    assert len(set(got.values())) <= 2
    for pid in set(got.values()):  # waited for: gone, not zombies
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_a_task_that_raises_is_raised_here_after_the_others_finish():
    answered = []

    def run(i):
        if i == 2:
            raise ValueError("task 2 is bad")
        return i

    with pytest.raises(ValueError, match="task 2 is bad"):
        run_forked(run, 6, 2, lambda i, v: answered.append(i))
    assert 2 not in answered


def test_an_exception_that_does_not_pickle_arrives_as_its_text():
    class Local(Exception):  # defined in a function: pickle cannot find it
        pass

    def run(i):
        raise Local("only its text travels")

    with pytest.raises(RuntimeError, match="Local: only its text travels"):
        run_forked(run, 1, 1, lambda i, v: None)


def test_a_worker_killed_mid_task_is_worker_died():
    def run(i):
        if i == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return i

    answered = []
    with pytest.raises(WorkerDied, match="died during task 1"):
        run_forked(run, 4, 2, lambda i, v: answered.append(i))
    assert 1 not in answered


def test_chunks_cover_the_range_once():
    assert chunks(5, 2) == [(0, 2), (2, 4), (4, 5)]
    assert chunks(0, 2) == []


def test_a_pool_keeps_each_workers_memory_between_runs_and_sends_tasks_to_the_worker_asked():
    kept = {}

    def handle(task):
        op, key, value = task
        if op == "put":
            kept[key] = (value, os.getpid())
            return os.getpid()
        return kept.pop(key)

    with Pool(handle, 2) as pool:
        pids = {}
        pool.run([("put", k, k * 10) for k in range(6)], pids.__setitem__, worker_of=lambda i: i % 2)
        assert len(set(pids.values())) == 2
        assert pids[0] == pids[2] == pids[4] != pids[1]
        got = {}
        pool.run([("get", k, None) for k in range(6)], got.__setitem__, worker_of=lambda i: i % 2)
        assert got == {k: (k * 10, pids[k]) for k in range(6)}  # each from the worker that kept it
        assert kept == {}  # nothing of it in this process


def test_a_pool_with_a_dead_worker_refuses_the_next_run():
    def handle(task):
        if task == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        return task

    with Pool(handle, 2) as pool:
        with pytest.raises(WorkerDied):
            pool.run(["die"], lambda i, v: None, worker_of=lambda i: 1)
        with pytest.raises(WorkerDied, match="earlier run"):
            pool.run(["fine"], lambda i, v: None, worker_of=lambda i: 0)


@pytest.mark.integration
def test_forked_workers_leave_the_parents_spark_connections_alone(spark, caplog):
    """py4j closes a thread's JVM connection with a socket shutdown when the thread's local
    storage goes, which a forked child's copy of every other thread does at once: the JVM then
    reset the parent's connection (found in the Spark engine's cycle on worker processes)."""
    caplog.set_level(logging.INFO, logger="py4j")
    go, done, counts = threading.Event(), threading.Event(), []

    def other_thread():  # a thread with its own JVM connection, alive across the forks
        counts.append(spark.range(3).count())
        go.wait(60)
        counts.append(spark.range(4).count())
        done.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    while not counts:
        threading.Event().wait(0.05)
    assert collect(lambda i: i, 4, 2) == {0: 0, 1: 1, 2: 2, 3: 3}
    go.set()
    assert done.wait(60)
    thread.join()
    assert counts == [3, 4]
    assert not [r for r in caplog.records if "while sending" in r.getMessage()]


def test_each_worker_runs_at_exit_when_the_pool_closes(tmp_path):
    def at_exit():
        (tmp_path / str(os.getpid())).write_text("released")

    pids = {}
    with Pool(lambda task: os.getpid(), 2, at_exit=at_exit) as pool:
        pool.run([0, 1], pids.__setitem__, worker_of=lambda i: i)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(str(p) for p in pids.values())


def test_a_run_cut_short_here_leaves_the_pool_refusing_more_runs():
    """Answers of the first run may still be on their way: a second run would take them for its
    own (review finding)."""

    def on_answer(i, value):
        raise KeyError("the caller failed on an answer")

    with Pool(lambda task: task, 2) as pool:
        with pytest.raises(KeyError):
            pool.run([1, 2], on_answer, worker_of=lambda i: i)
        with pytest.raises(RuntimeError, match="interrupted"):
            pool.run([3], lambda i, v: None)


def test_an_answer_that_does_not_pickle_is_an_error_naming_why():
    with pytest.raises(TypeError, match="cannot pickle"):  # was a bare WorkerDied
        run_forked(lambda i: threading.Lock(), 1, 1, lambda i, v: None)
