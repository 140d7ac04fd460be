"""A setting that reaches the edges, declared once: its kind, its bounds, whether it may be null,
its default, and the words a person reads beside it. The domain checks a value with it
(`Whole.check`); the API's serializers (`api.fields.declared_serializer`) and the console's forms
(`console.declared`) are made from the same declaration, so the three cannot disagree on a bound.

A table is a dict from the setting's name (as the API spells it) to its declaration, in the
order forms show them: `domain.policy_spec.POLICY_FIELDS`, `domain.compaction.COMPACTION_FIELDS`.
Plain Python: nothing here knows Django, DRF or the database (a bound that is a column's size is
written here as a number, `MAX_BIGINT_COLUMN`)."""

from __future__ import annotations

from dataclasses import dataclass

from domain.errors import FieldError

# the largest numbers the columns behind such settings hold (bigint, integer): a larger one would
# be a database error, a 500, rather than a 400 naming the field
MAX_BIGINT_COLUMN = 2**63 - 1
MAX_INT_COLUMN = 2**31 - 1
_ABSENT = object()


@dataclass(frozen=True, slots=True)
class Whole:
    """A whole number from `low` to `high`; null allowed when `nullable` (it then means `unset`:
    no limit, never, …). `default`: what an absent value is taken to be. `unit`: what it counts,
    for showing it ("seconds", "bytes", "limit": seconds or bytes as a policy's limit type says,
    "": a plain count)."""

    low: int
    high: int
    label: str
    help: str = ""
    nullable: bool = False
    default: int | None = None
    unit: str = ""
    unset: str = "—"

    def check(self, value: object, field: str) -> int | None:
        """The value, or a `FieldError` naming `field` that says what is wrong with it."""
        if value is None and self.nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise FieldError(field, "must be a whole number")
        if value < self.low:
            raise FieldError(field, "must not be negative" if self.low == 0 else f"must be at least {self.low}")
        if value > self.high:
            raise FieldError(field, f"must be at most {self.high}")
        return value


@dataclass(frozen=True, slots=True)
class Choice:
    """One of `choices` ((value, what a person reads), …)."""

    choices: tuple[tuple[str, str], ...]
    label: str
    help: str = ""
    nullable: bool = False
    default: str | None = None

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(value for value, _ in self.choices)

    def check(self, value: object, field: str) -> str | None:
        if value is None and self.nullable:
            return None
        if value not in self.values:
            raise FieldError(field, f"must be one of {', '.join(self.values)}")
        return value


@dataclass(frozen=True, slots=True)
class Flag:
    """True or false."""

    label: str
    help: str = ""
    default: bool = False
    nullable: bool = False

    def check(self, value: object, field: str) -> bool | None:
        if value is None and self.nullable:
            return None
        if not isinstance(value, bool):
            raise FieldError(field, "must be true or false")
        return value


Field = Whole | Choice | Flag


def take(table: dict[str, Field], data: dict, name: str, prefix: str = "") -> object:
    """`data[name]` checked by its declaration (named `prefix + name` in an error); an absent one
    is its default."""
    value = data.get(name, _ABSENT)
    declared = table[name]
    if value is _ABSENT:
        return declared.default
    return declared.check(value, prefix + name)


def defaults(table: dict[str, Field]) -> dict[str, object]:
    """Each setting's default, in the table's order."""
    return {name: declared.default for name, declared in table.items()}
