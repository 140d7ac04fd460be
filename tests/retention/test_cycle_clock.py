"""The clock a cycle may be run with (domain.cycle_clock), without Django."""

from datetime import UTC, datetime, timedelta

from domain.cycle_clock import SKEW, clock_problem

WALL = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def test_it_allows_the_present_a_small_skew_and_the_past_after_the_history():
    assert clock_problem(WALL, WALL, None) is None
    assert clock_problem(WALL + SKEW, WALL, None) is None
    assert clock_problem(WALL - timedelta(days=30), WALL, WALL - timedelta(days=31)) is None
    assert clock_problem(WALL - timedelta(days=30), WALL, WALL - timedelta(days=30)) is None  # the same moment


def test_it_refuses_a_clock_ahead_of_the_server():
    assert "in the future" in clock_problem(WALL + SKEW + timedelta(seconds=1), WALL, None)
    assert "in the future" in clock_problem(WALL + timedelta(days=3650), WALL, None)


def test_it_refuses_a_clock_behind_the_latest_truncation():
    problem = clock_problem(WALL - timedelta(hours=2), WALL, WALL - timedelta(hours=1))
    assert "before the latest truncation" in problem
