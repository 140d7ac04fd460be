"""Sizes and durations as people write and read them: `50GB`, `2GiB`, `7d`, `12h`, `1h30m` typed
in the console (the API keeps whole numbers of bytes and seconds), and sizes shown with the
labels that say which they are: `47.7 MiB` for 50 000 000 bytes (1024-based, IEC), never `MB`
for a 1024-based figure. Plain Python; the `cbr` command line, which imports nothing of the
server, reads them the same way (`cbr_client.cli`, held to this by one table of cases in the
tests)."""

from __future__ import annotations

import re

# decimal (SI) and binary (IEC) units; matched without regard to case ("gb", "GiB")
SIZE_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "pib": 2**50,
}
DURATION_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86_400, "w": 604_800}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)")
IEC = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB")


def parse_size(text: str) -> int:
    """`50GB` → 50 000 000 000, `2GiB` → 2 147 483 648, `1000` → 1000 (bytes). ValueError
    saying how to write one."""
    value, kind = parse_quantity(text)
    if kind == "time":
        raise ValueError(f"{text.strip()!r} is a duration, not a size")
    return value


def parse_duration(text: str) -> int:
    """`7d` → 604 800, `12h` → 43 200, `1h30m` → 5 400, `90` → 90 (seconds)."""
    value, kind = parse_quantity(text)
    if kind == "size":
        raise ValueError(f"{text.strip()!r} is a size, not a duration")
    return value


def parse_quantity(text: str) -> tuple[int, str | None]:
    """A whole number of bytes or seconds, and which it was written as: ("size", "time", or None
    for a bare number). Parts add up (`1h30m`, `1GiB512MiB`); a fraction is rounded down to a
    whole byte or second (`1.5KiB` → 1536)."""
    raw = text.strip().lower().replace("_", "")
    if not raw:
        raise ValueError("empty: a number, or one with a unit (50GB, 2GiB, 7d, 12h)")
    total, kinds, at = 0.0, set(), 0
    for match in _PART.finditer(raw):
        if match.start() != at:
            break
        number, unit = float(match.group(1)), match.group(2)
        if not unit:
            if match.end() != len(raw) or at:
                break  # a bare number only alone
            return int(number), None
        if unit in SIZE_UNITS:
            total, kind = total + number * SIZE_UNITS[unit], "size"
        elif unit in DURATION_UNITS:
            total, kind = total + number * DURATION_UNITS[unit], "time"
        else:
            break
        kinds.add(kind)
        at = match.end()
    if at != len(raw) or len(kinds) != 1:
        raise ValueError(
            f"{text.strip()!r} is not a size or a duration: a number, or one with a unit "
            "(bytes: B, KB, MB, GB, TB or KiB, MiB, GiB, TiB; time: s, m, h, d, w)"
        )
    return int(total), kinds.pop()


def size_text(n: int | float | None) -> str:
    """Bytes as people read them, 1024-based with IEC labels: `0 bytes`, `1 byte`, `999 bytes`,
    `1.0 KiB`, `47.7 MiB` (a no-break space between the number and its unit: they stay on one
    line)."""
    if n is None:
        return "—"
    n = int(n)
    if abs(n) < 1024:
        return "1\xa0byte" if n == 1 else f"{n}\xa0bytes"
    value, unit = float(n), 0
    while abs(value) >= 1024 and unit < len(IEC) - 1:
        value /= 1024
        unit += 1
    return f"{value:.1f}\xa0{IEC[unit]}"


def rate_text(per_s: float | None) -> str:
    """Events per second as people read them: `0`, `0.03`, `2.5`, `1,234` (two decimals below 1,
    one below 10, none from 10: a rate of one event a minute is not shown as 0)."""
    if per_s is None:
        return "—"
    if per_s == 0:
        return "0"
    if per_s < 0.995:  # (what rounds to 1.00 is shown as 1.0, what rounds to 10.0 as 10)
        return f"{per_s:.2f}"
    if per_s < 9.95:
        return f"{per_s:.1f}"
    return f"{round(per_s):,}"
