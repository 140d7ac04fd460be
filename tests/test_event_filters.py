"""Which events a search keeps (`domain.event_filters`), in plain Python."""

import pytest

from domain.errors import FieldError
from domain.event_filters import parse_filter, parse_json_condition

ORDER = b'{"amount": 150, "state": "paid", "items": [{"sku": "A-1", "qty": 2}], "note": null, "vip": true}'


@pytest.mark.parametrize(
    ("condition", "kept"),
    [
        ("$.amount>100", True),
        ("$.amount > 150", False),
        ("$.amount>=150", True),
        ("$.amount=150", True),
        ("$.amount=150.0", True),  # one number
        ("$.amount!=150", False),
        ("$.amount<200", True),
        ("$.state=paid", True),  # text that is not JSON: a string
        ('$.state="paid"', True),
        ('$.state<"q"', True),  # strings with strings
        ("$.state>100", False),  # a string is not ordered against a number
        ('$.amount="150"', False),  # nor equal to one
        ('$.items[0].sku="A-1"', True),
        ('$.items[0]["sku"]="A-1"', True),
        ("$.items[0].qty<=2", True),
        ("$.items[1].qty=2", False),  # nothing there
        ("$.missing=1", False),
        ("$.note=null", True),
        ("$.vip=true", True),
        ("$.vip=1", False),  # a boolean is not a number
        ("$.amount.deeper=1", False),
    ],
)
def test_json_conditions(condition, kept):
    assert parse_json_condition(condition).holds(ORDER) is kept


def test_a_payload_that_is_not_json_never_matches():
    assert not parse_json_condition("$.amount>1").holds(b"amount 150")
    assert not parse_json_condition("$.amount>1").holds(b"\xff\xfe")


@pytest.mark.parametrize("bad", ["amount>100", "$.amount", "$.amount>", "$.amount~1", "$[x]=1"])
def test_a_condition_that_is_not_one_is_refused_naming_json(bad):
    with pytest.raises(FieldError) as refused:
        parse_json_condition(bad)
    assert refused.value.field == "json"


def test_every_part_of_a_filter_must_match():
    where = parse_filter(contains="paid", headers=["type: created", "region:eu"], json_condition="$.amount>100")
    headers = {"type": "created", "region": "eu"}
    assert where.keeps(None, None, headers, ORDER)
    assert not where.keeps(None, None, {"type": "created"}, ORDER)  # a header missing
    assert not where.keeps(None, None, headers, ORDER.replace(b"paid", b"open"))  # the text missing
    assert not where.keeps(None, None, headers, ORDER.replace(b"150", b"50"))  # the condition false
    keyed = parse_filter(routing_key="customer-7", key="order-1")
    assert keyed.keeps(b"customer-7", b"order-1", None, b"x") and not keyed.keeps(b"customer-8", b"order-1", None, b"x")
    assert parse_filter().empty and not where.empty


@pytest.mark.parametrize(("kwargs", "field"), [({"headers": ["nocolon"]}, "header"), ({"contains": ""}, "contains")])
def test_bad_parts_are_refused_naming_them(kwargs, field):
    with pytest.raises(FieldError) as refused:
        parse_filter(**kwargs)
    assert refused.value.field == field
