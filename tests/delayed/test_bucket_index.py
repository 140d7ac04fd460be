"""The bucket index's rules (domain.delayed) on docs/design/delayed-delivery.md's worked examples,
and on random delays: handed out in (deliver_at, position) order, never early, all of them."""

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.delayed import (
    BucketIndex,
    DelayedConfig,
    Index,
    cut_segments,
    merge_choice,
    plan_loads,
    recovery_plan,
    round_budget,
)


def times(segments):
    return [[ix.deliver_at for ix in s.indexes] for s in segments]


def at(ts):
    return [Index(t, 1, 0, i) for i, t in enumerate(ts)]


def test_segments_close_at_the_count_limit_or_the_window():
    assert times(cut_segments(at([100, 101, 105, 108, 109, 115, 130]), 10, 3)) == [
        [100, 101, 105],
        [108, 109, 115],
        [130],
    ]


def test_segments_close_at_the_window_without_a_count_limit():
    assert times(cut_segments(at([1000, 1005, 1009, 1010, 1025]), 10, -1)) == [
        [1000, 1005, 1009],
        [1010],
        [1025],
    ]


def test_a_segment_records_its_time_range_and_offsets_per_chunk():
    (seg,) = cut_segments([Index(5, 1, 0, 7), Index(6, 1, 0, 9), Index(7, 2, 1, 3)], 100, -1)
    assert (seg.min_time, seg.max_time) == (5, 7)
    assert {k: list(v) for k, v in seg.bitmaps.items()} == {(1, 0): [7, 9], (2, 1): [3]}


def test_the_101_chunk_example_seals_five_buckets_of_four_segments():
    index = BucketIndex(
        DelayedConfig(min_index_count_per_bucket=20, max_time_step_per_segment=3600, max_indexes_per_segment=5)
    )
    for i in range(1, 102):
        assert index.add(Index(10 * i, i, 0, 0), now=0) == "mutable"
    assert [(b.first_chunk, b.last_chunk) for b in index.buckets] == [
        (1, 20),
        (21, 40),
        (41, 60),
        (61, 80),
        (81, 100),
    ]
    assert all([len(s.indexes) for s in b.segments] == [5, 5, 5, 5] for b in index.buckets)
    assert [ix.chunk for ix in index.mutable] == [101]
    assert index.queued == 25  # the first segment of each bucket, nothing more


def test_the_merge_takes_the_adjacent_pair_with_the_fewest_remaining():
    assert merge_choice([5, 3, 2, 4, 3]) == 1  # the 2nd and 3rd


def test_adding_is_deduplicated_and_old_chunks_go_straight_to_the_queue():
    index = BucketIndex(
        DelayedConfig(min_index_count_per_bucket=2, max_time_step_per_segment=100, max_indexes_per_segment=10)
    )
    assert index.add(Index(50, 1, 0, 0), now=10) == "mutable"
    assert index.add(Index(50, 1, 0, 0), now=10) == "duplicate"
    assert index.add(Index(5, 1, 0, 1), now=10) == "ordinary"  # already due: not delayed
    index.add(Index(60, 1, 0, 2), now=10)
    index.add(Index(70, 2, 0, 0), now=10)  # a newer chunk with 2 held: chunk 1 sealed
    assert [(b.first_chunk, b.last_chunk) for b in index.buckets] == [(1, 1)]
    assert index.add(Index(40, 1, 0, 5), now=10) == "queue"  # inside the immutable bucket's range
    assert index.contains((1, 0, 5)) and index.contains((1, 0, 2)) and not index.contains((1, 0, 9))


def test_recovery_drops_missing_and_enclosed_buckets():
    assert recovery_plan([(1, 20, True), (1, 40, True), (21, 40, True), (41, 60, False)]) == [0, 2, 3]


delays = st.lists(st.tuples(st.integers(1, 40), st.integers(0, 3), st.integers(1, 500)), min_size=1, max_size=200)


@settings(max_examples=150, deadline=None)
@given(delays, st.integers(1, 8), st.integers(1, 50), st.sampled_from([-1, 1, 3]), st.sampled_from([None, 1, 2]))
def test_random_delays_come_out_in_order_never_early_all_of_them(events, min_count, window, per_segment, max_buckets):
    index = BucketIndex(
        DelayedConfig(
            min_index_count_per_bucket=min_count,
            max_time_step_per_segment=window,
            max_indexes_per_segment=per_segment,
            max_num_buckets=max_buckets,
        )
    )
    added = set()
    offsets: dict[tuple[int, int], int] = {}
    for chunk, segment, delay in sorted(events, key=lambda e: e[0]):  # chunks arrive in order
        offset = offsets.setdefault((chunk, segment), 0)
        offsets[(chunk, segment)] += 1
        ix = Index(delay, chunk, segment, offset)
        if index.add(ix, now=0) != "duplicate":
            added.add(ix)
        index.merge_if_needed()
    index.seal()
    got = []
    for now in range(0, 520, 7):
        due = index.pop_due(now)
        assert all(ix.deliver_at <= now for ix in due)  # never early
        got += due
        index.merge_if_needed()
    assert got == sorted(added)  # in (deliver_at, position) order, each once, none lost
    assert index.pending == 0 and not index.buckets


def test_indexes_below_the_floor_are_dropped_not_handed_out():
    index = BucketIndex(
        DelayedConfig(min_index_count_per_bucket=1, max_time_step_per_segment=10, max_indexes_per_segment=2)
    )
    for offset in range(6):
        index.add(Index(100 + offset, 1 + offset // 3, 0, offset), now=0)
    index.seal()
    assert [ix.offset for ix in index.pop_due(200, floor=lambda segment: 4)] == [4, 5]
    assert index.pending == 0


def test_a_merge_after_some_were_handed_out_hands_none_out_twice():
    index = BucketIndex(
        DelayedConfig(
            min_index_count_per_bucket=2, max_time_step_per_segment=5, max_indexes_per_segment=2, max_num_buckets=None
        )
    )
    for chunk, times in ((1, (10, 12)), (2, (11, 13)), (3, (50, 60))):
        for offset, t in enumerate(times):
            index.add(Index(t, chunk, 0, offset), now=0)
    index.seal()
    first = index.pop_due(10)  # 10 goes; 12 of its segment is still queued
    assert [ix.deliver_at for ix in first] == [10]
    index.config = DelayedConfig(
        min_index_count_per_bucket=2, max_time_step_per_segment=5, max_indexes_per_segment=2, max_num_buckets=1
    )
    while index.merge_if_needed():
        pass
    rest = index.pop_due(100)
    assert [ix.deliver_at for ix in rest] == [11, 12, 13, 50, 60]  # 10 not again, none lost


def meta(segments):
    return [{"min": s.min_time, "max": s.max_time, "count": len(s.indexes)} for s in segments]


def test_a_round_loads_segments_in_frontier_order_up_to_its_budget():
    a = meta(cut_segments(at([10, 11, 20, 21, 30, 31]), 5, -1))  # 3 segments of 2: max 11, 21, 31
    b = meta(cut_segments(at([12, 13, 14, 25, 26, 40]), 5, -1))  # 3 segments: max 14, 26, 40
    # a's frontier (11) and b's (14) are due by 100: a's segment 1 (max 21) comes first, then b's
    # segment 1, then a's segment 2 (a's frontier 21 was passed, and it is a's last); a budget
    # of 6 indexes holds all three, 5 only the first two
    plan, bound = plan_loads([(11, 1, 1), (14, 2, 1)], {1: a, 2: b}, 100, 6)
    assert plan == {1: (1, 2), 2: (1, 1)} and bound == 25  # b's new frontier 26, less 1
    assert plan_loads([(11, 1, 1), (14, 2, 1)], {1: a, 2: b}, 100, 5) == ({1: (1, 1), 2: (1, 1)}, 20)
    # a budget of 1 still loads one segment: the earliest frontier's
    assert plan_loads([(11, 1, 1), (14, 2, 1)], {1: a, 2: b}, 100, 1) == ({1: (1, 1)}, 13)
    # the clock holds the bound, and a frontier not due yet is not loaded
    assert plan_loads([(11, 1, 1)], {1: a}, 15, 100) == ({1: (1, 1)}, 15)
    # a bucket listed as due beyond the listed ones (`after`) holds the bound too
    assert plan_loads([(11, 1, 1)], {1: a}, 100, 100, after=18) == ({1: (1, 2)}, 17)


def test_a_round_budget_grows_with_what_the_due_buckets_hold_in_the_queue():
    # given three buckets with 2, 3 and 1 segments loaded: their loaded segments hold 2, 4 and 7
    segments = {1: [{"count": 9}, {"count": 2}], 2: [{"count": 1}] * 2 + [{"count": 4}], 3: [{"count": 7}]}
    due = [(10, 1, 2), (11, 2, 3), (12, 3, 1)]
    # then the budget is `layers` times that, at least the base and at most the cap
    assert round_budget(due, segments, base=5, layers=4) == 4 * (2 + 4 + 7)
    assert round_budget(due, segments, base=100, layers=4) == 100
    assert round_budget(due, segments, base=5, layers=4, cap=30) == 30
    # a bucket merged away meanwhile (no metadata), or with nothing loaded, counts nothing
    assert round_budget([(10, 9, 1), (11, 1, 0)], segments, base=5) == 5


buckets_of_times = st.lists(st.lists(st.integers(0, 300), min_size=1, max_size=25), min_size=1, max_size=5)


@settings(max_examples=150, deadline=None)
@given(buckets_of_times, st.integers(1, 4), st.integers(1, 12), st.lists(st.integers(0, 40), max_size=15))
def test_rounds_of_planned_loads_release_in_order_never_early_all_of_them(times_of, per_segment, budget, steps):
    """What the hand-out does with plan_loads, simulated: loaded indexes due by the bound go out
    at once, the others wait in the queue with the buckets' first segments."""
    segments, queue, loaded, frontier = {}, set(), {}, {}
    for b, ts in enumerate(times_of):
        segments[b] = cut_segments([Index(t, b, 0, i) for i, t in enumerate(sorted(ts))], 10, per_segment)
        queue |= set(segments[b][0].indexes)
        loaded[b] = 1
        if len(segments[b]) > 1:
            frontier[b] = segments[b][0].max_time
    released, now = [], 0
    for now in [*[sum(steps[: i + 1]) for i in range(len(steps))], 10_000, 10_000]:
        for _ in range(200):
            due = sorted((edge, b, loaded[b]) for b, edge in frontier.items() if edge <= now)
            plan, bound = plan_loads(due, {b: meta(segments[b]) for b in segments}, now, budget)
            for b, (first, last) in plan.items():
                assert first == loaded[b]
                for seg in segments[b][first : last + 1]:
                    queue |= set(seg.indexes)
                loaded[b] = last + 1
                frontier.pop(b)
                if last + 1 < len(segments[b]):
                    frontier[b] = segments[b][last].max_time
            # nothing at or past a frontier goes out before that bucket's next segment is loaded
            assert bound <= now and all(bound < edge for edge in frontier.values())
            out = sorted(ix for ix in queue if ix.deliver_at <= bound)
            assert all(ix.deliver_at >= r.deliver_at for ix in out for r in released[-1:])  # in time order
            released += out
            queue -= set(out)
            for b in segments:  # only a bucket's last loaded segment waits (bar ties with a frontier)
                for seg in segments[b][: loaded[b] - 1]:
                    assert all(ix.deliver_at == seg.max_time for ix in seg.indexes if ix in queue)
            if not plan:
                break
    everything = {ix for b in segments for seg in segments[b] for ix in seg.indexes}
    assert sorted(released, key=lambda ix: ix.deliver_at) == released and set(released) == everything
    assert len(released) == len(everything)  # none twice
