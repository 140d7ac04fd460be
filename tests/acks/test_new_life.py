"""A state's life (`groups.ack_tracker.new_life`): drawn without a system call, and never the same
sequence in two processes forked from one (gunicorn's web workers)."""

import multiprocessing

from groups.ack_tracker import new_life


def _draws(conn) -> None:
    conn.send([new_life() for _ in range(5)])
    conn.close()


def test_a_forked_process_draws_other_lives_than_its_parent():
    context = multiprocessing.get_context("fork")
    ours, theirs = context.Pipe()
    child = context.Process(target=_draws, args=(theirs,))
    child.start()
    childs = ours.recv()
    child.join(10)
    parents = [new_life() for _ in range(5)]  # the same state as the child's, but for the fork

    assert childs != parents
    assert all(1 <= life < 1_000_000_000 for life in childs + parents)
