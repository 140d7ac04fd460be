"""Ordered groups' segment owners (domain.assignments): one owner at a time, spread evenly over the
live consumers, and never moved while deliveries of a segment are in flight."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.assignments import assign

SEGS = [str(n) for n in range(6)]
NOW, TIMEOUT = 1000.0, 30.0


def counts(owners: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for owner in owners.values():
        out[owner] = out.get(owner, 0) + 1
    return out


def test_segments_are_spread_evenly_and_a_consumer_keeps_its_own():
    first = assign(SEGS, {"a": NOW, "b": NOW, "c": NOW}, {}, set(), NOW, TIMEOUT)
    assert counts(first) == {"a": 2, "b": 2, "c": 2}
    again = assign(SEGS, {"a": NOW, "b": NOW, "c": NOW}, first, set(), NOW + 1, TIMEOUT)
    assert again == first  # nothing moves while nothing changes


def test_a_consumer_that_joins_gets_its_share_of_idle_segments_only():
    two = assign(SEGS, {"a": NOW, "b": NOW}, {}, set(), NOW, TIMEOUT)
    busy = {seg for seg, owner in two.items() if owner == "a"}  # a has all its deliveries out
    three = assign(SEGS, {"a": NOW, "b": NOW, "c": NOW}, two, busy, NOW, TIMEOUT)
    assert all(three[seg] == "a" for seg in busy)  # in flight: stays
    assert counts(three) == {"a": 3, "b": 2, "c": 1}  # c takes what b could give
    settled = assign(SEGS, {"a": NOW, "b": NOW, "c": NOW}, three, set(), NOW + 5, TIMEOUT)
    assert counts(settled) == {"a": 2, "b": 2, "c": 2}  # once a's are idle, it gives one up


def test_a_silent_consumers_segments_pass_on_only_once_nothing_of_them_is_in_flight():
    owners = assign(SEGS, {"a": NOW, "b": NOW, "c": NOW}, {}, set(), NOW, TIMEOUT)
    c_segs = sorted(seg for seg, owner in owners.items() if owner == "c")
    heard = {"a": NOW + 60, "b": NOW + 60, "c": NOW}  # c silent for a minute
    held = assign(SEGS, heard, owners, {c_segs[0]}, NOW + 60, TIMEOUT)
    assert held[c_segs[0]] == "c" and held[c_segs[1]] in ("a", "b")
    freed = assign(SEGS, heard, held, set(), NOW + 90, TIMEOUT)  # its lease expired
    assert "c" not in freed.values() and counts(freed) == {"a": 3, "b": 3}
    assert assign(SEGS, {"a": 0.0}, {}, set(), NOW, TIMEOUT) == {}  # nobody live: nobody owns


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32))
def test_one_owner_each_never_moved_in_flight_and_even_where_idle(seed):
    rng = random.Random(seed)
    segments = [str(n) for n in range(rng.randint(1, 12))]
    consumers = [f"c{n}" for n in range(rng.randint(1, 5))]
    owners: dict[str, str] = {}
    now = 0.0
    for _ in range(20):
        now += rng.choice([1.0, 10.0, 40.0])
        heard = {c: now - rng.choice([0.0, 5.0, 60.0]) for c in consumers}
        in_flight = {seg for seg in segments if seg in owners and rng.random() < 0.4}
        new = assign(segments, heard, owners, in_flight, now, TIMEOUT)
        live = {c for c, at in heard.items() if now - at <= TIMEOUT}
        for seg in in_flight:  # what is in flight never changes hands
            assert new[seg] == owners[seg]
        for seg, owner in new.items():  # an owner is live, or still holds deliveries of it
            assert owner in live or (seg in in_flight and owners.get(seg) == owner)
        if live:
            assert set(new) == set(segments)  # every segment has an owner
            if not in_flight:  # with nothing in flight, as even as can be
                loads = [sum(1 for o in new.values() if o == c) for c in live]
                assert max(loads) - min(loads) <= 1
        owners = new
