"""A retention policy as a user writes it (DESIGN.md §6, §10), validated field by field.

Plain Python: the API and the console both call `parse_policy`, so a policy is checked once, the
same way, with errors that name the field.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from streams.domain.errors import FieldError

LIMIT_TYPES = ("time", "size", "none")
# what the policy's columns hold: min and max are 64-bit, the two durations 32-bit (a larger
# number was a database error, a 500, rather than a 400 naming the field)
MAX_LIMIT = 2**63 - 1
MAX_SECONDS = 2**31 - 1
FIELDS = frozenset(
    {"limit_type", "min", "max", "consumption_based", "subscriber_timeout_s", "fallback_after_s"}
)


@dataclass(frozen=True, slots=True)
class PolicySpec:
    limit_type: str
    min: int
    max: int | None
    consumption_based: bool
    subscriber_timeout_s: int | None
    fallback_after_s: int | None

    def as_dict(self) -> dict:
        return asdict(self)


def parse_policy(data: object, prefix: str = "") -> PolicySpec:
    def name(f: str) -> str:
        return f"{prefix}{f}"

    if not isinstance(data, dict):
        raise FieldError(prefix.rstrip(".") or "retention_policy", "must be an object")
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        raise FieldError(name(unknown[0]), "is not a field of a retention policy")
    limit_type = data.get("limit_type")
    if limit_type not in LIMIT_TYPES:
        raise FieldError(name("limit_type"), f"must be one of {', '.join(LIMIT_TYPES)}")
    minimum = _count(data.get("min", 0), name("min"))
    maximum = data.get("max")
    if maximum is not None:
        maximum = _count(maximum, name("max"))
        if maximum < minimum:
            raise FieldError(name("max"), f"must be at least min ({minimum})")
    if limit_type == "none" and (minimum or maximum is not None):
        raise FieldError(name("limit_type"), "min and max need limit_type 'time' or 'size'")
    consumption = data.get("consumption_based", False)
    if not isinstance(consumption, bool):
        raise FieldError(name("consumption_based"), "must be true or false")
    timeout = _optional_count(data.get("subscriber_timeout_s"), name("subscriber_timeout_s"), MAX_SECONDS)
    fallback = _optional_count(data.get("fallback_after_s"), name("fallback_after_s"), MAX_SECONDS)
    return PolicySpec(limit_type, minimum, maximum, consumption, timeout, fallback)


def _count(value: object, field: str, largest: int = MAX_LIMIT) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(field, "must be a whole number")
    if value < 0:
        raise FieldError(field, "must not be negative")
    if value > largest:
        raise FieldError(field, f"must be at most {largest}")
    return value


def _optional_count(value: object, field: str, largest: int = MAX_LIMIT) -> int | None:
    return None if value is None else _count(value, field, largest)
