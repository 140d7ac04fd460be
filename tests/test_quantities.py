"""Sizes and durations as people write and read them (`domain.quantities`), and the `cbr` command
line's own copy of the same reading and writing (it imports nothing of the server): one table of
cases holds both."""

import argparse

import pytest

from cbr_client import cli
from domain.quantities import parse_duration, parse_quantity, parse_size, rate_text, size_text

WRITTEN = [
    ("50GB", 50_000_000_000, "size"),
    ("50gb", 50_000_000_000, "size"),
    ("2GiB", 2 * 1024**3, "size"),
    ("1 GiB", 1024**3, "size"),
    ("1.5KiB", 1536, "size"),
    ("1GiB512MiB", 1024**3 + 512 * 1024**2, "size"),
    ("7d", 604_800, "time"),
    ("12h", 43_200, "time"),
    ("1h30m", 5_400, "time"),
    ("1h 30min", 5_400, "time"),
    ("2w", 1_209_600, "time"),
    ("90", 90, None),
    ("1_000", 1_000, None),
    ("0", 0, None),
]
NOT_WRITTEN = ["", "   ", "50XB", "7d2GB", "10 5", "-5", "GB", "5GB x", "1e3", "d7"]
SHOWN = [
    (0, "0\xa0bytes"),
    (1, "1\xa0byte"),
    (1023, "1023\xa0bytes"),
    (1024, "1.0\xa0KiB"),
    (50_000_000, "47.7\xa0MiB"),  # never "47.7 MB": a 1024-based figure has an IEC label
    (1024**3, "1.0\xa0GiB"),
    (3 * 1024**5, "3.0\xa0PiB"),
]


@pytest.mark.parametrize(("text", "value", "kind"), WRITTEN)
def test_what_people_write_is_read_alike_by_the_server_and_the_cli(text, value, kind):
    assert parse_quantity(text) == (value, kind)
    assert cli.quantity(text) == (value, kind)


@pytest.mark.parametrize("text", NOT_WRITTEN)
def test_what_is_neither_is_refused_by_both_saying_how_to_write_one(text):
    with pytest.raises(ValueError, match="a number, or one with a unit"):
        parse_quantity(text)
    with pytest.raises(argparse.ArgumentTypeError, match="a number, or one with a unit"):
        cli.quantity(text)


@pytest.mark.parametrize(("value", "shown"), SHOWN)
def test_sizes_are_shown_alike_with_iec_labels(value, shown):
    assert size_text(value) == cli.size_text(value) == shown


def test_a_size_is_not_a_duration_nor_the_other_way_round():
    assert parse_size("2GiB") == 2 * 1024**3 and parse_duration("7d") == 604_800
    assert parse_size("1000") == 1000 and parse_duration("60") == 60
    with pytest.raises(ValueError, match="a duration, not a size"):
        parse_size("7d")
    with pytest.raises(ValueError, match="a size, not a duration"):
        parse_duration("50GB")


@pytest.mark.parametrize(
    ("per_s", "shown"),
    [
        (None, "—"),
        (0, "0"),
        (0.0333, "0.03"),
        (0.005, "0.01"),
        (0.996, "1.0"),
        (2.54, "2.5"),
        (9.96, "10"),
        (1234.4, "1,234"),
    ],
)
def test_rates_are_shown_alike_with_the_decimals_their_size_needs(per_s, shown):
    assert rate_text(per_s) == cli.rate_text(per_s) == shown
