"""Which events a search keeps: by routing key, by compaction key, by text the payload contains,
by header values, and by a condition on a JSON payload (`$.amount>100`). The one rule, used by
the API's plain reads, the console's event browser and `cbr tail` (through the API). Plain
Python: it sees an event's stored fields, never the store.

A JSON condition is a path from the payload's root (`$`, then `.name`, `["name"]` or `[index]`),
an operator (`=`, `!=`, `<`, `<=`, `>`, `>=`) and a value written as JSON (`100`, `"paid"`,
`true`, `null`; text that is not JSON is taken as a string: `$.state=paid`). Equal values of
either kind match `=`; `<` and the like compare numbers with numbers and strings with strings,
and nothing else. A payload that is not JSON, or has nothing at the path, never matches."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from domain.errors import FieldError

_OPERATORS = ("<=", ">=", "!=", "=", "<", ">")  # longest first
_STEP = re.compile(r'\.([A-Za-z_][\w-]*)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]')
_MISSING = object()


@dataclass(frozen=True)
class JsonCondition:
    path: tuple[str | int, ...]
    operator: str
    value: Any

    def holds(self, payload: bytes) -> bool:
        try:
            found: Any = json.loads(payload)
        except ValueError:  # not JSON, or not UTF-8
            return False
        for step in self.path:
            in_list = isinstance(step, int) and isinstance(found, list) and step < len(found)
            in_object = isinstance(step, str) and isinstance(found, dict) and step in found
            if not (in_list or in_object):
                return False
            found = found[step]
        return _compare(found, self.operator, self.value)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _compare(found: Any, op: str, value: Any) -> bool:
    if op in ("=", "!="):
        same = (
            found == value and (_number(found) == _number(value)) and isinstance(found, bool) == isinstance(value, bool)
        )
        return same if op == "=" else not same
    if not ((_number(found) and _number(value)) or (isinstance(found, str) and isinstance(value, str))):
        return False
    return {"<": found < value, "<=": found <= value, ">": found > value, ">=": found >= value}[op]


def parse_json_condition(text: str, field_name: str = "json") -> JsonCondition:
    raw = text.strip()
    if not raw.startswith("$"):
        raise FieldError(field_name, f"{text!r}: a condition starts at the payload's root, e.g. $.amount>100")
    at, path = 1, []
    while (step := _STEP.match(raw, at)) is not None:
        name, index, quoted = step.groups()
        path.append(int(index) if index is not None else (name if name is not None else json.loads(f'"{quoted}"')))
        at = step.end()
    rest = raw[at:].lstrip()
    operator = next((op for op in _OPERATORS if rest.startswith(op)), None)
    if operator is None:
        raise FieldError(field_name, f"{text!r}: a path, then one of = != < <= > >=, then a value, e.g. $.amount>100")
    written = rest[len(operator) :].strip()
    if not written:
        raise FieldError(field_name, f"{text!r}: no value after {operator}")
    try:
        value = json.loads(written)
    except ValueError:
        value = written  # `$.state=paid`: text as a string
    return JsonCondition(tuple(path), operator, value)


@dataclass(frozen=True)
class EventFilter:
    """What an event must have to be kept; empty: every event."""

    routing_key: bytes | None = None
    key: bytes | None = None
    contains: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()
    json: JsonCondition | None = None

    @property
    def empty(self) -> bool:
        return not (self.routing_key or self.key or self.contains or self.headers or self.json)

    def keeps(self, routing_key: bytes | None, key: bytes | None, headers: dict | None, payload: bytes) -> bool:
        if self.routing_key is not None and routing_key != self.routing_key:
            return False
        if self.key is not None and key != self.key:
            return False
        if self.contains is not None and self.contains not in payload:
            return False
        for name, value in self.headers:
            if (headers or {}).get(name) != value:
                return False
        return self.json is None or self.json.holds(payload)


def parse_filter(
    *,
    routing_key: str | None = None,
    key: str | None = None,
    contains: str | None = None,
    headers: list[str] | tuple[str, ...] = (),
    json_condition: str | None = None,
) -> EventFilter:
    """A search as a request or a form gives it (`header` as `name:value`), each part checked and a
    refusal naming its field: `contains`, `header`, `json`."""
    pairs = []
    for written in headers:
        name, sep, value = written.partition(":")
        if not sep or not name.strip():
            raise FieldError("header", f"{written!r} is not name:value")
        pairs.append((name.strip(), value.strip()))
    if contains == "":
        raise FieldError("contains", "must not be empty")
    return EventFilter(
        routing_key=None if not routing_key else routing_key.encode(),
        key=None if not key else key.encode(),
        contains=None if contains is None else contains.encode(),
        headers=tuple(pairs),
        json=None if not json_condition else parse_json_condition(json_condition),
    )
