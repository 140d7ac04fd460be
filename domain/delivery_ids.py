"""Delivery ids, in one place: how one is written, how a run of them is written as a range, and
how one read back is split and checked. Plain Python: the read's answers (`streams.wire`, JSON and
binary) write them with these rules, an ack or a nack reads them back with these rules.

An id is `<incarnation>[.<life>]-<stream id>-<segment>-<offset>-<epoch>`: the subscription's
incarnation (from its random state key), the life of the Redis state that handed it out (absent
for a state of an older release: life 0), the stream and segment, the event's offset, and the
delivery's count (its epoch). Everything before `-<offset>` is the id's *prefix*: the same for
every delivery a subscription's segment hands out in one life. A range `<prefix>-<first>..<last>-
<epoch>` names the deliveries of offsets first to last, both included, at one epoch.

Numbers are written as the server writes them: ASCII digits, no leading zero, at most 18 digits
(9 for an epoch, a life and a segment number), so that a number read back is one the server
could have written (`007`, `٣` and 19-digit offsets are refused, not read as something else)."""

from __future__ import annotations

from itertools import repeat

OFFSET_DIGITS = 18  # offsets, stream ids and incarnations
EPOCH_DIGITS = 9  # delivery counts, lives, segment numbers


def prefix(incarnation: int, stream_id: int, segment: str, life: int = 0) -> str:
    """What every delivery id of a subscription's segment starts with, in one life of its state."""
    first = f"{incarnation}.{life}" if life else str(incarnation)
    return f"{first}-{stream_id}-{segment}"


def delivery_id(id_prefix: str, offset: int, epoch: int) -> str:
    return f"{id_prefix}-{offset}-{epoch}"


def id_ranges(id_prefix: str, runs: list[list[int]] | list[tuple[int, int, int]]) -> list[str]:
    """Runs of deliveries (`[first offset, how many, epoch]`) as ranges, one per run."""
    return [f"{id_prefix}-{first}..{first + n - 1}-{epoch}" for first, n, epoch in runs]


def printf_template(escaped_prefix: bytes, epoch: int | None = None) -> bytes:
    """The bytes of an id as a `%`-template of its offset (and of its epoch when `epoch` is None),
    after a prefix already escaped for `%`: how a read's JSON answer writes a thousand ids at once."""
    return escaped_prefix + (b"-%d-%d" if epoch is None else b"-%%d-%d" % epoch)


def as_written(number: str, digits: int) -> bool:
    """`number` as the server writes one: 1 to `digits` ASCII digits, no leading zero."""
    return 0 < len(number) <= digits and number.isascii() and number.isdigit() and (number[0] != "0" or number == "0")


def split(raw: str) -> tuple[str, int, int, int] | None:
    """An id or a range read back: (prefix, first offset, last offset, epoch), or None when it is
    not written as the server writes them. The prefix is not checked here (`split_prefix`)."""
    head, _, epoch = raw.rpartition("-")
    id_prefix, _, offset = head.rpartition("-")
    first, dots, last = offset.partition("..")
    if not id_prefix or not as_written(epoch, EPOCH_DIGITS):
        return None
    if dots:
        if not (as_written(first, OFFSET_DIGITS) and as_written(last, OFFSET_DIGITS)):
            return None
        return id_prefix, int(first), int(last), int(epoch)
    if not as_written(offset, OFFSET_DIGITS):
        return None
    return id_prefix, int(offset), int(offset), int(epoch)


def split_prefix(id_prefix: str) -> tuple[str, int, str] | None:
    """A prefix read back: (incarnation as written, life, `<stream id>-<segment>`), or None when
    its incarnation or life is not written as the server writes them. Whether the rest names a
    segment is the reader's to say (`names_a_segment`, or a lookup of the group's own)."""
    first, _, rest = id_prefix.partition("-")
    incarnation, dot, life = first.partition(".")
    if not as_written(incarnation, OFFSET_DIGITS) or (dot and (not as_written(life, EPOCH_DIGITS) or life == "0")):
        return None
    return incarnation, int(life) if dot else 0, rest


def names_a_segment(rest: str) -> bool:
    """Whether `<stream id>-<segment>` (what follows a prefix's incarnation) is written as the
    server writes one."""
    stream_id, _, segment = rest.partition("-")
    return as_written(stream_id, OFFSET_DIGITS) and as_written(segment, EPOCH_DIGITS)


def split_plain(ids: list) -> tuple[tuple[str, ...], list[int], list[int]] | None:
    """The common case of many ids read back at once (an ack of a thousand), without a Python
    step per id: every id a string of one delivery (no range), offset and epoch written as the
    server writes them. (prefixes, offsets, epochs), split and checked by C-level `map`s; None
    when any id is not so (then `split` says which, and why)."""
    if not all(type(raw) is str for raw in ids):
        return None
    parts = list(map(str.rsplit, ids, repeat("-"), repeat(2)))
    if set(map(len, parts)) != {3}:
        return None
    heads, offsets, epochs = zip(*parts, strict=True)
    digits = "".join(offsets) + "".join(epochs)
    if (
        not (digits.isascii() and digits.isdigit())
        or min(map(len, offsets)) < 1
        or max(map(len, offsets)) > OFFSET_DIGITS
        or min(map(len, epochs)) < 1
        or max(map(len, epochs)) > EPOCH_DIGITS
        or not _unpadded(offsets)
        or not _unpadded(epochs)
    ):
        return None
    return heads, list(map(int, offsets)), list(map(int, epochs))


def _unpadded(numbers: tuple[str, ...]) -> bool:
    """No number of `numbers` has a leading zero ("0" itself is fine), counted in C."""
    return sum(map(str.startswith, numbers, repeat("0"))) == numbers.count("0")
