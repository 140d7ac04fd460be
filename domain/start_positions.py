"""Where a reader group starts, where it ends, and where a seek moves it (docs/api.md):
Pravega's starting and ending stream cuts and `resetReaderGroup`, Pulsar's seek by position and
by publish time, JetStream's deliver policies. Plain Python: the shapes requests may take, checked
and parsed; resolving a position to offsets needs the store and is the caller's.

A position is one of
- `"head"` (the first event still held), `"tail"` (what is published from now on);
- `{"time": ISO 8601}`: per segment, the first event published at or after that time (the tail
  where there is none), not in the future;
- `{"stream_cuts": {"scope/name": cut, …}}`: given cuts of the group's streams (a stream left out
  is at its head when starting, and stays where it is when seeking).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from domain import times
from domain.errors import FieldError
from domain.names import split_stream_name

KINDS = ("head", "tail", "time", "stream_cuts")


@dataclass(frozen=True)
class Position:
    kind: str  # one of KINDS
    time: datetime | None = None
    cuts: Mapping[str, object] = field(default_factory=dict)  # stream name -> the cut as sent

    def as_json(self) -> str | dict:
        """As a request gives it and an answer shows it."""
        if self.kind == "time":
            assert self.time is not None
            return {"time": self.time.isoformat().replace("+00:00", "Z")}
        if self.kind == "stream_cuts":
            return {"stream_cuts": dict(self.cuts)}
        return self.kind


def parse_time(value: object, field: str, now: datetime) -> datetime:
    """An ISO 8601 time with its offset (or Z), in UTC (`domain.times`), not after `now`."""
    at = times.parse_time(value, field)
    if at > now:
        raise FieldError(field, f"{value} is in the future: no event was published then yet")
    return at


def parse_position(value: object, field: str, now: datetime) -> Position:
    """A start or seek target as sent: `"head"`, `"tail"`, `{"time": …}` or `{"stream_cuts": …}`
    (the cuts' streams are named and their shape checked here; their offsets against the streams
    by the caller)."""
    if value in ("head", "tail"):
        return Position(str(value))
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in ("time", "stream_cuts"):
        raise FieldError(field, 'must be "head", "tail", {"time": ISO 8601} or {"stream_cuts": {"scope/name": cut}}')
    if "time" in value:
        return Position("time", time=parse_time(value["time"], f"{field}.time", now))
    return Position("stream_cuts", cuts=check_stream_cuts(value["stream_cuts"], f"{field}.stream_cuts"))


def check_stream_cuts(value: object, field: str) -> dict[str, object]:
    """`{"scope/name": cut, …}`, naming at least one stream; each name checked (the cuts are the
    caller's to check against their streams)."""
    if not isinstance(value, dict) or not value:
        raise FieldError(field, 'must be an object {"scope/name": stream cut, …} naming at least one stream')
    for name in value:
        split_stream_name(name, f"{field}.{name}")
    return dict(value)


def parse_seek(body: object, now: datetime) -> tuple[Position, object]:
    """A seek request: exactly one of `position` ("head" or "tail"), `time` or `stream_cuts`, and
    an optional `generation` (checked by the caller). Returns the target and the generation."""
    if not isinstance(body, dict):
        raise FieldError("body", "must be a JSON object")
    unknown = sorted(set(body) - {"position", "time", "stream_cuts", "generation"})
    if unknown:
        raise FieldError(unknown[0], "is not a field of a seek")
    given = [k for k in ("position", "time", "stream_cuts") if k in body]
    if len(given) != 1:
        raise FieldError(
            "position" if not given else given[1],
            "a seek takes exactly one of position, time or stream_cuts",
        )
    kind = given[0]
    if kind == "position":
        if body["position"] not in ("head", "tail"):
            raise FieldError("position", 'must be "head" or "tail"')
        target = Position(body["position"])
    elif kind == "time":
        target = Position("time", time=parse_time(body["time"], "time", now))
    else:
        target = Position("stream_cuts", cuts=check_stream_cuts(body["stream_cuts"], "stream_cuts"))
    return target, body.get("generation")


def behind(end: Mapping[str, int], start: Mapping[str, int]) -> str | None:
    """A segment where the end cut lies behind the start cut (a bounded group would end before it
    begins), or None."""
    for seg, offset in end.items():
        if offset < start.get(seg, 0):
            return seg
    return None


def finished(floors: Mapping[str, int], end: Mapping[str, int]) -> bool:
    """Whether a bounded group has processed everything up to its end cut on these segments."""
    return all(floors.get(seg, 0) >= offset for seg, offset in end.items())
