"""A read's body: the short way `read_request` takes the body consumers send all day gives exactly
what the serializer gives, and every other body goes to the serializer (the same refusal)."""

from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework import serializers

from api.group_serializers import ReadRequestSerializer, read_request

texts = st.one_of(
    st.text(max_size=130),
    st.sampled_from(["", " c", "c ", "c\x00", "\ud800", "c" * 128, "c" * 129, "consumer-1", "é"]),
)
values = st.one_of(
    st.integers(-2, 12_000),
    st.sampled_from([0, 1, 1000, 10_000, 10_001, 30_000, 30_001, True, False, None, 1.0, "5", [], {}]),
    texts,
)
bodies = st.one_of(
    st.dictionaries(
        st.sampled_from(["max_events", "wait_ms", "consumer", "ack", "ranges", "other"]), values, max_size=6
    ),
    st.fixed_dictionaries(
        {"max_events": st.integers(1, 10_000)},
        optional={
            "wait_ms": st.integers(0, 30_000),
            "consumer": texts,
            "ranges": st.booleans(),
            "ack": st.none() | st.fixed_dictionaries({"delivery_ids": st.lists(st.text(max_size=5), max_size=3)}),
        },
    ),
    st.sampled_from([[], "x", 3, None]),
)


def by_serializer(body):
    serializer = ReadRequestSerializer(data=body)
    if serializer.is_valid():
        return dict(serializer.validated_data)
    return serializer.errors


def by_read_request(body):
    try:
        return dict(read_request(body))
    except serializers.ValidationError as exc:
        return exc.detail


@settings(max_examples=500)
@given(bodies)
def test_the_short_way_answers_what_the_serializer_answers(body):
    assert by_read_request(body) == by_serializer(body)


def test_the_body_consumers_send_takes_the_short_way(monkeypatch):
    # given a serializer that would fail the test if it were built
    monkeypatch.setattr(ReadRequestSerializer, "__init__", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    body = {"max_events": 1000, "consumer": "c1", "ranges": True, "ack": {"delivery_ids": ["1-2-0-5..9-1"]}}
    assert read_request(body) == {**body, "wait_ms": 0}
    assert read_request({"max_events": 5}) == {
        "max_events": 5,
        "wait_ms": 0,
        "consumer": "",
        "ack": None,
        "ranges": False,
    }
