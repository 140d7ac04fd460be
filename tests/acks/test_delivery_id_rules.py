"""Delivery ids (`domain.delivery_ids`), plain Python: what is written is read back as it was,
and nothing the server could not have written is read as something it did write."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain import delivery_ids as ids

big = st.integers(0, 10**18 - 1)
small = st.integers(0, 10**9 - 1)


@given(big, big, small, small, small, st.integers(0, 10**6))
def test_an_id_or_a_range_written_is_read_back_as_it_was(incarnation, stream_id, segment, life, epoch, offset):
    prefix = ids.prefix(incarnation, stream_id, str(segment), life)
    assert ids.split_prefix(prefix) == (str(incarnation), life, f"{stream_id}-{segment}")
    assert ids.names_a_segment(f"{stream_id}-{segment}")
    assert ids.split(ids.delivery_id(prefix, offset, epoch)) == (prefix, offset, offset, epoch)
    (written,) = ids.id_ranges(prefix, [[offset, 3, epoch]])
    assert ids.split(written) == (prefix, offset, offset + 2, epoch)
    assert ids.split_plain([ids.delivery_id(prefix, offset, epoch)] * 2) == (
        (prefix, prefix),
        [offset] * 2,
        [epoch] * 2,
    )
    assert (ids.printf_template(prefix.encode(), epoch) % offset).decode() == ids.delivery_id(prefix, offset, epoch)
    assert (ids.printf_template(prefix.encode()) % (offset, epoch)).decode() == ids.delivery_id(prefix, offset, epoch)


@pytest.mark.parametrize(
    "raw",
    [
        "1-2-0-007-1",  # a leading zero
        "1-2-0-7-01",
        "1-2-0-٣-1",  # a digit that is not ASCII
        "1-2-0-" + "9" * 19 + "-1",  # longer than the server writes
        "1-2-0-7-" + "9" * 10,
        "1-2-0-7..-1",  # half a range
        "1-2-0--1",
        "7-1",  # no prefix
        "",
    ],
)
def test_what_the_server_could_not_have_written_is_refused(raw):
    assert ids.split(raw) is None
    assert ids.split_plain([raw]) is None


@pytest.mark.parametrize("prefix", ["01-2-0", "1.0-2-0", "1.01-2-0", "x-2-0", "1.-2-0"])
def test_a_prefix_the_server_could_not_have_written_is_refused(prefix):
    assert ids.split_prefix(prefix) is None


@pytest.mark.parametrize("rest", ["02-0", "2-x", "2", "2-0123456789", "٢-0"])
def test_a_segment_the_server_could_not_have_written_is_refused(rest):
    assert not ids.names_a_segment(rest)


def test_a_range_is_not_a_plain_id():
    assert ids.split_plain(["1-2-0-5..9-1"]) is None
    assert ids.split_plain(["1-2-0-5-1", 5]) is None
