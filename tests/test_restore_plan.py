"""`domain.restoring.plan_restore`: where a segment rebuilt from the tier starts and ends, and the
offset ranges it reports lost, from the copied chunks' ranges and what the database knows."""

import pytest

from domain.restoring import RestorePlan, plan_restore


@pytest.mark.parametrize(
    ("copied", "head", "tail", "plan"),
    [
        # every chunk copied up to the tail anyone saw: nothing lost
        ([(0, 10), (10, 20)], 0, 20, RestorePlan(0, 0, 20, [])),
        # the active chunk never sealed: offsets past the last copy up to what was handed out
        ([(0, 10), (10, 20)], 0, 27, RestorePlan(0, 0, 27, [(20, 27)])),
        # a sealed chunk never copied, between two copied ones
        ([(0, 10), (20, 30)], 0, 30, RestorePlan(0, 0, 30, [(10, 20)])),
        # the head inside the first copied chunk: the head stays where the truncation left it
        ([(10, 20), (20, 30)], 14, 30, RestorePlan(14, 10, 30, [])),
        # the head's chunk never copied: from the head to the first copy is lost, the head moves on
        ([(20, 30)], 12, 30, RestorePlan(20, 20, 30, [(12, 20)])),
        # the database knew of less than the tier holds (a row not refreshed): the tier's end wins
        ([(0, 10)], 0, 4, RestorePlan(0, 0, 10, [])),
        # all three kinds of loss at once
        ([(10, 20), (30, 40)], 5, 44, RestorePlan(10, 10, 44, [(5, 10), (20, 30), (40, 44)])),
        # nothing copied: everything from the head to the tail is lost, appends go on at the tail
        ([], 3, 9, RestorePlan(9, 9, 9, [(3, 9)])),
        ([], 0, 0, RestorePlan(0, 0, 0, [])),
    ],
)
def test_a_restore_plan_starts_at_the_head_goes_on_past_every_offset_seen_and_names_what_is_lost(
    copied, head, tail, plan
):
    assert plan_restore(copied, head, tail) == plan


def test_appends_never_go_on_below_an_offset_anyone_saw_nor_below_the_last_copy():
    for copied in ([], [(0, 5)], [(0, 5), (9, 30)]):
        for tail in (0, 7, 31, 100):
            got = plan_restore(copied, 0, tail)
            assert got.tail >= tail and got.tail >= (copied[-1][1] if copied else 0)
            covered = sum(e - b for b, e in copied) + sum(e - b for b, e in got.lost)
            assert covered == got.tail - min([0] + [b for b, _ in copied])  # every offset copied or lost
