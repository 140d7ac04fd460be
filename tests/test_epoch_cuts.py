"""Cuts across scale events (domain.segment_layout, domain.epoch_cuts): the worked cases of
Pravega's retention tests as the scaling rules restate them, the refusals, and readers simulated
over random scale histories, each checked against what the reader did (an oracle that knows which
segments it finished and where it stands in the others)."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain import cuts
from domain.cuts import Order
from domain.epoch_cuts import (
    END,
    bytes_between,
    check_epoch_cut,
    compare,
    lower_bound,
    start_in,
    tail_cut,
    wholly_before,
)
from domain.errors import FieldError
from domain.segment_layout import Layout

T, S = 1 / 3, 1 / 6


def case_1() -> Layout:
    """0 [0,⅓), 1 [⅓,⅔), 2 [⅔,1); 0 splits into 3 [0,⅙), 4 [⅙,⅓); 1, 2, 4 merge into 5 [⅙,1);
    3, 5 merge into 6 [0,1)."""
    layout = Layout.fixed(3)
    layout = layout.scale(["0"], [[0, S], [S, T]], ["3", "4"]).layout
    layout = layout.scale(["1", "2", "4"], [[S, 1]], ["5"]).layout
    return layout.scale(["3", "5"], [[0, 1]], ["6"]).layout


def case_2() -> Layout:
    """0 [0,½), 1 [½,1); both split into 2 [0,.6), 3 [.6,1); 3 into 4 [.6,.8), 5 [.8,1); 4, 5
    merge into 6 [.6,1); 2 and 6 split into 7 [0,.3), 8 [.3,.6), 9 [.6,1); 7, 8, 9 into 10."""
    layout = Layout.fixed(2)
    layout = layout.scale(["0", "1"], [[0, 0.6], [0.6, 1]], ["2", "3"]).layout
    layout = layout.scale(["3"], [[0.6, 0.8], [0.8, 1]], ["4", "5"]).layout
    layout = layout.scale(["4", "5"], [[0.6, 1]], ["6"]).layout
    layout = layout.scale(["2", "6"], [[0, 0.3], [0.3, 0.6], [0.6, 1]], ["7", "8", "9"]).layout
    return layout.scale(["7", "8", "9"], [[0, 1]], ["10"]).layout


def sized(lengths: dict[str, int]):
    """Sizes where each event is one byte: a segment's bytes between two offsets."""
    return lambda sid, start, stop: (lengths[sid] if stop == END else stop) - start


def test_case_1_the_bound_of_two_subscribers_and_what_it_deletes():
    layout = case_1()
    assert [s.id for s in layout.active] == ["6"] and layout.epoch == 3
    assert layout["5"].predecessors == ("1", "2", "4") and layout.successors("4") == ["5"]
    a = check_epoch_cut(layout, {"0": 1, "5": -1}, "cut")  # Pravega's -1: a future segment, written 0
    b = check_epoch_cut(layout, {"0": 1, "2": 1, "5": 0}, "cut")
    assert a == {"0": 1, "5": 0}
    bound = lower_bound(layout, [a, b])
    assert bound == {"0": 1, "2": 1, "5": 0}
    assert compare(layout, bound, a) is Order.BEFORE and compare(layout, a, bound) is Order.EQUAL_OR_AFTER
    assert compare(layout, b, bound) is Order.EQUAL_OR_AFTER and compare(layout, bound, b) is Order.EQUAL_OR_AFTER
    # segment 1 lies wholly before the bound (its bytes count as read); 0, 2 and 4 do not
    assert wholly_before(layout, bound) == ["1"]
    lengths = {"0": 1, "1": 1, "2": 2, "3": 1, "4": 1, "5": 2, "6": 2}
    head, tail = {"0": 0, "1": 0, "2": 0}, tail_cut(layout, {"6": 2})
    assert tail == {"6": 2}
    assert bytes_between(layout, head, tail, sized(lengths)) == 10  # every byte the stream ever held
    assert bytes_between(layout, head, bound, sized(lengths)) == 1 + 1 + 1  # 0's first, all of 1, 2's first
    assert bytes_between(layout, bound, tail, sized(lengths)) == 10 - 3


def test_case_2_a_cut_with_a_hole_is_refused_and_the_bound_is_in_the_first_epoch():
    layout = case_2()
    with pytest.raises(FieldError) as refused:
        check_epoch_cut(layout, {"0": 1, "3": 1}, "stream_cut")
    assert refused.value.field == "stream_cut" and "[0.5, 0.6)" in refused.value.message
    a = check_epoch_cut(layout, {"0": 1, "2": 0, "8": 0, "9": 1}, "cut")
    b = check_epoch_cut(layout, {"1": 1, "2": 0}, "cut")
    assert lower_bound(layout, [a, b]) == {"0": 1, "1": 1}
    assert compare(layout, a, b) is Order.OVERLAPS  # a is ahead on [.6, 1), behind on [½, .6)
    # case 3: no subscriber, time min 0: the tail, which deletes every sealed segment
    tail = tail_cut(layout, {"10": 2})
    assert wholly_before(layout, tail) == [str(n) for n in range(10)]


@pytest.mark.parametrize(
    ("cut", "says"),
    [
        ({"0": 1, "1": 1, "2": 1, "3": 1}, "segments 0 and 3 share keys"),  # started beside its predecessor
        ({"3": 0, "4": 0, "1": 0, "2": 1, "6": 2}, "segments 4 and 6 share keys"),  # 6 started, 4 not done
        ({"0": 1, "1": 1}, "nothing holds [0.666667, 1)"),
        ({"0": 1, "1": 1, "2": 1, "9": 0}, "no such segment in this stream: 9"),
        ({"0": -2, "1": 0, "2": 0}, "offsets must be 0 or more"),
    ],
)
def test_cuts_that_are_not_cuts_of_the_stream_are_refused_saying_why(cut, says):
    layout = Layout.fixed(3).scale(["0"], [[0, S], [S, T]], ["3", "4"]).layout
    layout = layout.scale(["1", "4"], [[S, 2 / 3]], ["5"]).layout
    layout = layout.scale(["5"], [[S, 2 / 3]], ["6"]).layout
    with pytest.raises(FieldError, match=re.escape(says)):
        check_epoch_cut(layout, cut, "cut")


@pytest.mark.parametrize(
    ("seal", "ranges", "field", "says"),
    [
        (["0"], [[0, 0.25]], "new_ranges", "must cover exactly the sealed segments' keys: [0, 0.5)"),
        (["0"], [[0, 0.3], [0.2, 0.5]], "new_ranges", "two ranges share keys"),
        (["0"], [[0.3, 0.2]], "new_ranges", "lo < hi"),
        (["0"], [["a", 1]], "new_ranges", "pair of numbers"),
        (["0", "0"], [[0, 0.5]], "seal", "twice"),
        (["7"], [[0, 0.5]], "seal", "no such segment: 7"),
        ([], [[0, 0.5]], "seal", "non-empty"),
        (["0", "1"], [[0, 0.4], [0.5, 1]], "new_ranges", "cover exactly"),
    ],
)
def test_a_scale_that_would_lose_or_double_keys_is_refused_naming_the_field(seal, ranges, field, says):
    with pytest.raises(FieldError, match=re.escape(says)) as refused:
        Layout.fixed(2).scale(seal, ranges, [f"n{i}" for i in range(len(ranges))])
    assert refused.value.field == field


def test_a_sealed_segment_cannot_be_sealed_again_and_keys_go_to_the_active_segments():
    layout = Layout.fixed(2).scale(["0"], [[0, 0.25], [0.25, 0.5]], ["2", "3"]).layout
    with pytest.raises(FieldError, match="already sealed") as refused:
        layout.scale(["0"], [[0, 0.5]], ["4"])
    assert refused.value.field == "seal"
    assert [layout.route(x) for x in (0.0, 0.1, 0.25, 0.49, 0.5, 0.99)] == ["2", "2", "3", "3", "1", "1"]
    merged = layout.scale(["3", "1"], [[0.25, 1]], ["4"]).layout  # a merge of neighbours, named in any order
    assert merged["4"].predecessors == ("3", "1") and merged["4"].epoch == 2
    assert [merged.route(x) for x in (0.1, 0.3, 0.9)] == ["2", "4", "4"]
    # a fixed stream's first epoch routes as the store always has: segment floor(position * n)
    fixed = Layout.fixed(3)
    rng = random.Random(7)
    for x in [rng.random() for _ in range(2000)] + [T, 2 * T, 0.0]:
        assert fixed.route(x) == str(min(int(x * 3), 2))


# -- readers over random scale histories ----------------------------------------------------------


def random_layout(rng: random.Random, scales: int) -> Layout:
    layout = Layout.fixed(rng.randint(1, 3))
    names = iter(range(100, 1000))
    for _ in range(scales):
        active = layout.active  # sorted by where their keys start
        i = rng.randrange(len(active))
        j = min(len(active), i + rng.randint(1, 3))
        run = active[i:j]  # contiguous neighbours
        lo, hi = run[0].lo, run[-1].hi
        cuts = sorted(rng.sample(range(1, 8), rng.randint(0, 3)))
        points = [lo, *(lo + (hi - lo) * c / 8 for c in cuts), hi]
        ranges = [[a, b] for a, b in zip(points, points[1:], strict=False)]
        layout = layout.scale([s.id for s in run], ranges, [str(next(names)) for _ in ranges]).layout
    return layout


class Reader:
    """A reader that finishes segments only after their predecessors (the rule of order across
    scales), and stands somewhere in each segment it may read."""

    def __init__(self, layout: Layout, lengths: dict[str, int], rng: random.Random, steps: int):
        self.layout, self.lengths = layout, lengths
        self.done: set[str] = set()
        self.at: dict[str, int] = {}
        for _ in range(steps):
            ready = [sid for sid in self.available() if sid not in self.done]
            if not ready:
                break
            sid = rng.choice(ready)
            if rng.random() < 0.6 and layout.is_sealed(sid):  # an active segment has no end yet
                self.done.add(sid)
                self.at.pop(sid, None)
            else:
                self.at[sid] = rng.randint(0, lengths[sid])

    def available(self) -> list[str]:
        return [
            s.id
            for s in self.layout.segments.values()
            if s.id not in self.done and all(p in self.done for p in s.predecessors)
        ]

    def cut(self) -> dict[str, int]:
        cut = {sid: self.at.get(sid, 0) for sid in self.available()}
        # where a key's first unfinished segment still waits for a predecessor elsewhere: at 0
        for s in self.layout.segments.values():
            if s.id not in self.done and s.id not in cut and any(p in self.done for p in s.predecessors):
                cut[s.id] = 0
        return cut

    def bytes_read(self) -> int:
        return sum(self.lengths[sid] for sid in self.done) + sum(self.at.values())


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 6), st.integers(1, 4))
def test_readers_cuts_are_valid_and_the_bound_and_the_bytes_say_what_the_readers_did(seed, scales, readers):
    rng = random.Random(seed)
    layout = random_layout(rng, scales)
    lengths = {sid: rng.randint(1, 5) for sid in layout.segments}
    size = sized(lengths)
    head = {s.id: 0 for s in layout.segments.values() if s.epoch == 0}
    group = [Reader(layout, lengths, rng, rng.randint(0, 12)) for _ in range(readers)]
    cuts = [check_epoch_cut(layout, r.cut(), "cut") for r in group]
    for reader, cut in zip(group, cuts, strict=True):
        assert bytes_between(layout, head, cut, size) == reader.bytes_read()
        assert sorted(wholly_before(layout, cut)) == sorted(reader.done)
        assert compare(layout, cut, cut) is Order.EQUAL_OR_AFTER
        assert compare(layout, cut, head) is Order.EQUAL_OR_AFTER
    bound = check_epoch_cut(layout, lower_bound(layout, cuts), "bound")
    for reader, cut in zip(group, cuts, strict=True):
        assert compare(layout, cut, bound) is Order.EQUAL_OR_AFTER  # never ahead of any reader
        assert bytes_between(layout, head, bound, size) + bytes_between(layout, bound, cut, size) == reader.bytes_read()
        assert set(wholly_before(layout, bound)) <= reader.done  # it deletes nothing a reader needs
    # the tail is after every cut, and between the head and the tail lies every byte
    tail = tail_cut(layout, lengths)
    assert all(compare(layout, tail, cut) is Order.EQUAL_OR_AFTER for cut in cuts)
    assert bytes_between(layout, head, tail, size) == sum(lengths.values()) - sum(
        lengths[s.id] for s in layout.active
    ) + sum(tail.values())


@given(st.integers(0, 2**32), st.integers(1, 6))
@settings(max_examples=100, deadline=None)
def test_a_reader_that_moves_on_is_after_where_it_was(seed, scales):
    rng = random.Random(seed)
    layout = random_layout(rng, scales)
    lengths = {sid: rng.randint(1, 5) for sid in layout.segments}
    reader = Reader(layout, lengths, rng, rng.randint(0, 8))
    before = reader.cut()
    ready = [sid for sid in reader.available() if sid not in reader.done and layout.is_sealed(sid)]
    if not ready:
        return
    moved = rng.choice(ready)
    reader.done.add(moved)
    reader.at.pop(moved, None)
    after = check_epoch_cut(layout, reader.cut(), "cut")
    assert compare(layout, after, before) is Order.EQUAL_OR_AFTER
    assert compare(layout, before, after) is Order.BEFORE
    assert start_in(layout, after, moved) == END


def test_a_bound_never_starts_a_successor_beside_a_predecessor_still_behind():
    # 0 [0,½) and 1 [½,1) merge into 2 [0,1), which splits into 3 [0,½) and 4 [½,1)
    layout = Layout.fixed(2).scale(["0", "1"], [[0, 1]], ["2"]).layout
    layout = layout.scale(["2"], [[0, 0.5], [0.5, 1]], ["3", "4"]).layout
    a = check_epoch_cut(layout, {"2": 5}, "cut")  # in 2, which it started
    b = check_epoch_cut(layout, {"0": 3, "4": 0}, "cut")  # still in 0; past 2 on [½, 1)
    # slowest at [0, ½): b in 0; at [½, 1): a in 2, taken where nothing of 2 was read yet
    bound = check_epoch_cut(layout, lower_bound(layout, [a, b]), "bound")
    assert bound == {"0": 3, "2": 0}
    assert compare(layout, a, bound) is Order.EQUAL_OR_AFTER and compare(layout, b, bound) is Order.EQUAL_OR_AFTER


def brute_valid(layout: Layout, cut: dict[str, int]) -> bool:
    """Validity, from the definition, at a key inside every interval between the boundaries of
    all the stream's segments: each key held, and at each key the cut's segments that hold it are
    one segment (started or not) and future successors of it."""
    bounds = sorted({0.0, 1.0, *(x for s in layout.segments.values() for x in (s.lo, s.hi))})
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        key = (lo + hi) / 2
        holding = sorted((layout[sid] for sid in cut if layout[sid].lo <= key < layout[sid].hi), key=lambda s: s.epoch)
        if not holding:
            return False
        first, rest = holding[0], holding[1:]
        if any(cut[s.id] != 0 or not layout.is_after(s.id, first.id) for s in rest):
            return False
    return True


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 5))
def test_any_cut_is_accepted_exactly_when_it_holds_every_key_once_started(seed, scales):
    rng = random.Random(seed)
    layout = random_layout(rng, scales)
    ids = list(layout.segments)
    cut = {sid: rng.choice([0, 0, 1, 3]) for sid in rng.sample(ids, rng.randint(1, len(ids)))}
    try:
        check_epoch_cut(layout, cut, "cut")
        accepted = True
    except FieldError as refused:
        assert refused.field == "cut"
        accepted = False
    assert accepted == brute_valid(layout, cut)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 5))
def test_comparison_is_a_partial_order_over_readers_cuts(seed, scales):
    rng = random.Random(seed)
    layout = random_layout(rng, scales)
    lengths = {sid: rng.randint(1, 3) for sid in layout.segments}
    cuts = [check_epoch_cut(layout, Reader(layout, lengths, rng, rng.randint(0, 10)).cut(), "c") for _ in range(4)]

    def at_or_after(a, b):
        return compare(layout, a, b) is Order.EQUAL_OR_AFTER

    for a in cuts:
        for b in cuts:
            order, back = compare(layout, a, b), compare(layout, b, a)
            # one answer is the mirror of the other
            assert (order, back) in {
                (Order.EQUAL_OR_AFTER, Order.BEFORE),
                (Order.BEFORE, Order.EQUAL_OR_AFTER),
                (Order.OVERLAPS, Order.OVERLAPS),
                (Order.EQUAL_OR_AFTER, Order.EQUAL_OR_AFTER),
            }
            if at_or_after(a, b) and at_or_after(b, a):  # antisymmetric: one position at every key
                assert bytes_between(layout, a, b, sized(lengths)) == bytes_between(layout, b, a, sized(lengths)) == 0
            for c in cuts:  # transitive
                if at_or_after(a, b) and at_or_after(b, c):
                    assert at_or_after(a, c)


def test_a_cut_taken_before_a_scale_stands_at_the_start_of_the_segments_made_after_it():
    """Inside CBR cuts name every segment held; one recorded before a scale (a retention-set
    record, an acknowledgement cut) does not name the new segments: it stands at 0 in them."""
    before = {"0": 5, "1": 7}  # taken in epoch 0
    after = {"0": 5, "1": 7, "2": 3, "3": 0}  # epoch 1: "2" and "3" replaced "0"
    assert cuts.compare(after, before) is Order.EQUAL_OR_AFTER
    assert cuts.compare(before, after) is Order.BEFORE
    assert cuts.compare(before, {"0": 5, "1": 7, "2": 0, "3": 0}) is Order.EQUAL_OR_AFTER
    assert cuts.is_at_or_after(after, before) and not cuts.is_at_or_after(before, after)
    assert cuts.lower_bound([before, after]) == {"0": 5, "1": 7, "2": 0, "3": 0}
    assert cuts.moves_head(after, before) and not cuts.moves_head(before, after)
