"""Delivery ids as an ack or a nack sends them: the one-pass parse of the common case finds exactly
what the id-by-id parse finds, and leaves every other list to it (which names the bad id)."""

from collections import Counter
from typing import NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.acks import Delivery
from domain.delivery_ids import id_ranges
from domain.errors import FieldError
from groups.ack_tracker import _handed_out, _handed_out_as_runs, runs_of
from groups.consuming.acking import AckOutcome, IdPrefixes, Named, _parse_each, _parse_plain_ids, _tally
from groups.consuming.answers import ReadPart, add_run

INCARNATION = 12  # the subscriptions' (one number for all three here)
KNOWN = {(3, "0"): INCARNATION, (3, "1"): INCARNATION, (40, "0"): INCARNATION}
# as a state of an older release writes them (no life), and as states started since do
PREFIXES = {f"{INCARNATION}-{sid}-{seg}": (sid, seg) for sid, seg in KNOWN} | {
    f"{INCARNATION}.{life}-{sid}-{seg}": (sid, seg) for sid, seg in KNOWN for life in (7, 123456789)
}


def prefixes():
    return IdPrefixes(KNOWN)


part = st.one_of(st.integers(0, 10**19).map(str), st.sampled_from(["", "007", "1٣", "²", "x", "-", " 1", "1\n"]))
good = st.builds(
    lambda p, o, e: f"{p}-{o}-{e}",
    st.sampled_from(sorted(PREFIXES)),
    st.integers(0, 10**18 - 1),
    st.integers(1, 10**9 - 1),
)
odd = st.one_of(
    st.builds(lambda g, s, seg, o, e: "-".join((g, s, seg, o, e)), part, part, part, part, part),
    st.builds(lambda p, o: f"{p}-{o}", st.sampled_from(sorted(PREFIXES)), part),
    st.integers(),
    st.none(),
    st.text(max_size=12),
)


def each(ids):
    try:
        by_slot, apart = _parse_each(ids, prefixes())
        assert not apart  # not lenient: nothing is set apart
        return by_slot
    except FieldError as exc:
        return exc.field, exc.message


@given(st.lists(st.one_of(good, good, good, odd), min_size=1, max_size=30))
def test_the_one_pass_parse_agrees_with_the_id_by_id_parse(ids):
    plain = _parse_plain_ids(ids, prefixes())
    if plain is not None:
        assert plain == each(ids)


@pytest.mark.parametrize(
    "bad", ["12-3-0-5-1\n12-3-0-6-1", "12-3-0-5-1\n", "12-9-0-5-1", "12-3-0-5-", "12-3-0-5-1234567890"]
)
def test_a_list_with_anything_unusual_goes_to_the_id_by_id_parse(bad):
    assert _parse_plain_ids(["12-3-0-1-1", bad], prefixes()) is None
    assert _parse_plain_ids(["12-3-0-1-1", "12-3-1-9-2", "12-40-0-0-1"], prefixes()) == each(
        ["12-3-0-1-1", "12-3-1-9-2", "12-40-0-0-1"]
    )


@given(st.lists(good, min_size=1, max_size=60))
def test_ids_as_the_server_writes_them_take_the_one_pass_parse_in_any_order_of_segments(ids):
    plain = _parse_plain_ids(ids, prefixes())
    assert plain is not None and plain == each(ids)
    assert sorted(i for items in plain.values() for i, _ in items.items()) == list(range(len(ids)))


def named(*runs):
    out = Named()
    for i, (first, last, epoch) in enumerate(runs):
        out.add(i, first, last, epoch)
    return out


def test_a_tally_of_all_acked_counts_them_all_and_refuses_none():
    outcome = AckOutcome()
    _tally(outcome, ["a", "b"], named((1, 1, 1), (2, 2, 1)), {})
    _tally(outcome, ["a", "b"], named((1, 1, 1), (2, 2, 1)), {1: "stale"})
    _tally(outcome, ["a"], named((1, 1, 1)), {}, nack=True)
    assert (outcome.acked, outcome.given_back) == (3, 1)
    assert outcome.refused == [{"field": "delivery_ids[1]", "delivery_id": "b", "reason": "stale"}]


def test_a_refusal_inside_a_range_names_the_range_and_the_one_delivery():
    # given a range of five deliveries and an id, the script refusing the fourth of the range
    # (position 3), one waiting for sinks and one acknowledged already
    outcome = AckOutcome()
    ids = ["12-3-0-10..14-2", "12-3-0-20-1"]
    _tally(outcome, ids, named((10, 14, 2), (20, 20, 1)), {3: "unknown", 0: "waiting-for-sinks", 5: "already-acked"})

    # then the others count, and the refusal names the range's index and the delivery's own id
    assert (outcome.acked, outcome.waiting_for_sinks) == (3, 1)
    assert outcome.refused == [{"field": "delivery_ids[0]", "delivery_id": "12-3-0-13-2", "reason": "unknown"}]


@pytest.mark.parametrize(
    "bad",
    [
        "12-3-0-007-1",
        "12-3-0-00-1",
        "12-3-0-5-01",  # zero-padded offset and epoch
        "12-3-0-١٢-1",
        "12-3-0-5-١",
        "12-3-0-²-1",  # digits that are not ASCII
        "012-3-0-5-1",
        "12-03-0-5-1",
        "12-3-00-5-1",
        "١٢-3-0-5-1",  # the same in the prefix's numbers
        "12-3-0-5-1\n",
        "12.0-3-0-5-1",  # a life is never 0 as written (no life: no dot)
        "12.007-3-0-5-1",
        "12.1234567890-3-0-5-1",
        "12.-3-0-5-1",
        "12.٣-3-0-5-1",
    ],
)
def test_an_id_the_server_never_wrote_is_refused_naming_it(bad):
    # given an id the server could not have written beside one it could
    ids = ["12-3-0-1-1", bad]

    # then the one-pass parse leaves the list to the id-by-id parse, which refuses the id
    assert _parse_plain_ids(ids, prefixes()) is None
    with pytest.raises(FieldError) as refused:
        _parse_each(ids, prefixes())
    assert (refused.value.field, refused.value.code) == ("delivery_ids[1]", "unknown_delivery")


def test_zero_is_an_offset_and_an_epoch_as_written():
    ids = ["12-3-0-0-1", "12-40-0-10-0", "12-3-1-0-0"]
    plain = _parse_plain_ids(ids, prefixes())
    assert plain is not None and plain == each(ids)
    assert [d for items in plain.values() for _, d in items.items()] == [(0, 1), (10, 0), (0, 0)]


@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(PREFIXES)), st.integers(0, 10**6), st.integers(0, 40), st.integers(1, 9)),
        min_size=1,
        max_size=8,
    )
)
def test_a_range_names_exactly_the_deliveries_its_ids_would(runs):
    ranges = [f"{p}-{first}..{first + n}-{e}" for p, first, n, e in runs]
    ids = [f"{p}-{o}-{e}" for p, first, n, e in runs for o in range(first, first + n + 1)]
    by_range, by_id = each(ranges), each(ids)
    assert {k: [d for _, d in v.items()] for k, v in by_range.items()} == {
        k: [d for _, d in v.items()] for k, v in by_id.items()
    }
    # each delivery is counted against the range it came in, and a range is one run, not spelled out
    counted = Counter(i for items in by_range.values() for i, _ in items.items())
    assert counted == {i: n + 1 for i, (_, _, n, _) in enumerate(runs)}
    assert sum(len(named.runs) for named in by_range.values()) == len(runs)
    assert sum(named.count for named in by_range.values()) == len(ids)


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 3)), max_size=40))
def test_runs_spell_out_the_deliveries_they_were_made_of_in_order(pairs):
    deliveries = [Delivery(o, e) for o, e in pairs]
    runs = runs_of(deliveries)
    assert [Delivery(o, e) for first, last, e in runs for o in range(first, last + 1)] == deliveries
    # consecutive offsets at one epoch share a run
    assert all(not (a[2] == b[2] and a[1] + 1 == b[0]) for a, b in zip(runs, runs[1:]))


class _Event(NamedTuple):
    offset: int


def part_of(deliveries) -> ReadPart:
    """A read's part holding these deliveries, one by one, as a read adds them."""
    part = ReadPart("s/t", "0", "7-8-0")
    for d in deliveries:
        part.add(_Event(d.offset), d.epoch)
    return part


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3)), max_size=30))
def test_a_reads_id_ranges_name_its_deliveries_in_order_one_range_per_run(steps):
    # given deliveries whose offsets go up by 0-3 at epochs 1-3 (runs and breaks of every kind)
    offset, deliveries = 10, []
    for step, epoch in steps:
        offset += step
        deliveries.append(Delivery(offset, epoch))
    part = part_of(deliveries)

    ranges = id_ranges("7-8-0", part.runs)

    # then the ranges spell out exactly those deliveries, in order, and no two could be one
    spelled, runs = [], []
    for r in ranges:
        prefix, rest = r[: len("7-8-0")], r[len("7-8-0") + 1 :]
        first_last, epoch = rest.rsplit("-", 1)
        first, last = map(int, first_last.split(".."))
        assert prefix == "7-8-0" and first <= last
        spelled += [Delivery(o, int(epoch)) for o in range(first, last + 1)]
        runs.append((first, last, int(epoch)))
    assert spelled == deliveries
    assert [(item.offset, epoch) for item, epoch in zip(part.items, part.epochs())] == deliveries
    assert part.epochs() == [d.epoch for d in deliveries]
    assert all(not (a[2] == b[2] and a[1] + 1 == b[0]) for a, b in zip(runs, runs[1:]))


def test_a_part_that_is_one_run_is_one_range_and_any_break_splits_it():
    one = [Delivery(o, 2) for o in range(5, 1005)]
    assert id_ranges("7-8-0", part_of(one).runs) == ["7-8-0-5..1004-2"]
    # an epoch that differs, an offset skipped, two offsets swapped: a range each side of the break
    assert id_ranges("7-8-0", part_of(one[:3] + [Delivery(8, 1)] + one[4:6]).runs) == [
        "7-8-0-5..7-2",
        "7-8-0-8..8-1",
        "7-8-0-9..10-2",
    ]
    assert id_ranges("7-8-0", part_of(one[:2] + one[3:5]).runs) == ["7-8-0-5..6-2", "7-8-0-8..9-2"]
    assert id_ranges("7-8-0", part_of([one[1], one[0]]).runs) == ["7-8-0-6..6-2", "7-8-0-5..5-2"]
    # a run added whole grows the run before it when it follows it at its count
    part = part_of(one[:3])
    add_run(part.runs, 8, 10, 2)
    add_run(part.runs, 18, 2, 1)
    assert id_ranges("7-8-0", part.runs) == ["7-8-0-5..17-2", "7-8-0-18..19-1"]


def test_a_hand_out_read_as_runs_holds_the_same_deliveries_as_spelled_out():
    # the HAND_OUT script's answer: redeliveries "offset:epoch", first deliveries as runs "a-b",
    # then dead letters, missed, floor, next, sinks done, life, and how many expired
    answer = [b"3:2,9:4", b"10-14,20-21", [b"5"], 1, 3, 21, b"9=search", 42, 2]
    spelled, runs = _handed_out(answer), _handed_out_as_runs(answer)
    assert runs.first_runs == [(10, 14), (20, 21)] and spelled.first_runs == []
    assert spelled.deliveries == runs.deliveries + [Delivery(o, 1) for o in (10, 11, 12, 13, 20)]
    assert runs.deliveries == [Delivery(3, 2), Delivery(9, 4)]
    assert (spelled.dead_letter, spelled.missed, spelled.floor, spelled.next) == ([5], 1, 3, 21)
    assert spelled.sinks_acked == runs.sinks_acked == {9: ("search",)}
    assert spelled.expired == runs.expired == 2


def test_ids_of_another_life_point_at_their_own_life_on_the_same_segment():
    # given ids of one segment from two lives of its Redis state (before and after a loss)
    ids = ["12.7-3-0-5-1", "12.123456789-3-0-5-2", "12-3-0-6-1"]

    # then each names its life: the scripts refuse a delivery of a life that is not theirs
    plain = _parse_plain_ids(ids, prefixes())
    assert plain is not None and plain == each(ids)
    assert {where: named.items() for where, named in plain.items()} == {
        (3, "0", 7): [(0, Delivery(5, 1))],
        (3, "0", 123456789): [(1, Delivery(5, 2))],
        (3, "0", 0): [(2, Delivery(6, 1))],
    }


def test_a_carried_ack_sets_apart_ids_from_before_a_seek_and_refuses_any_other_bad_one():
    # given the segment's subscription sought twice (incarnations 98, then 99, then 12 now)
    sought = IdPrefixes(KNOWN, {(3, "0"): [98, 99]})
    ids = ["99.4-3-0-5-1", "12-3-1-2-1", "98-3-0-1-1"]

    # then a plain ack refuses the first, naming it
    with pytest.raises(FieldError) as refused:
        _parse_each(ids, sought)
    assert (refused.value.field, refused.value.code) == ("delivery_ids[0]", "unknown_delivery")
    assert "sought" in refused.value.message
    # and an ack a read carries sets the ids from before the seeks apart and keeps the live one
    by_slot, apart = _parse_each(ids, sought, "ack.delivery_ids", lenient=True)
    assert apart == [(0, "stale", 5, 5, 1), (2, "stale", 1, 1, 1)]
    assert {where: named.items() for where, named in by_slot.items()} == {(3, "1", 0): [(1, Delivery(2, 1))]}
    # and another group's id, one of a stream the group does not read, or a malformed one still
    # refuses the whole of it
    for bad in ("77-3-0-5-1", "12-77-0-1-1", "12-3-0-007-1"):
        with pytest.raises(FieldError) as other:
            _parse_each([*ids, bad], sought, "ack.delivery_ids", lenient=True)
        assert (other.value.field, other.value.code) == ("ack.delivery_ids[3]", "unknown_delivery")
