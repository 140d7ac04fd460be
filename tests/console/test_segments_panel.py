"""The stream page's Segments panel: the key space over epochs as a picture, the segments held,
the scale form (operators: split, merge with the next, refusals beside the form), the scaling
policy in words and its form (operators: saved by the service the API's PUT calls, refusals beside
the field they name), and the history."""

import re

import factories
import pytest
from page_text import text

from streams import logs, services
from streams.models import Scaling, Stream
from streams.scaling import do_scale

pytestmark = pytest.mark.django_db

URL = "/streams/shop/orders/segments/"
POLICY_URL = "/streams/shop/orders/scaling-policy/"
PAGE = "/streams/shop/orders/"


@pytest.fixture
def stream():
    stream = factories.make_stream(segment_count=2)
    factories.publish(stream, 10, b"x" * 10, routing_key=b"k1")
    logs.refresh_segments(stream)
    return stream


def boxes(html):
    """The picture's boxes: (segment id, state, x, y, width, height)."""
    found = re.findall(
        r'<g class="seg (\w+)"><title>segment (\w+):[^<]*</title>\s*<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"',
        html,
    )
    return {sid: (state, *map(float, rest)) for state, sid, *rest in found}


def test_the_picture_draws_each_segment_over_its_keys_and_epochs(admin_client, stream):
    do_scale(stream, seal=["0"], new_ranges=[[0, 0.25], [0.25, 0.5]])
    do_scale(stream, seal=["3", "1"], new_ranges=[[0.25, 1]])
    html = admin_client.get("/streams/shop/orders/").content.decode()
    drawn = boxes(html)
    # three epochs, 640 wide: 0 and 1 from epoch 0; 2 and 3 from epoch 1; 4 from epoch 2
    assert drawn["0"][0] == "sealed" and drawn["0"][1:] == (0.0, 0.0, pytest.approx(640 / 3, abs=0.01), 120.0)
    assert drawn["1"][0] == "sealed" and drawn["1"][3] == pytest.approx(1280 / 3, abs=0.01)  # sealed at epoch 2
    assert drawn["2"][0] == "active" and drawn["2"][1:3] == (pytest.approx(640 / 3, abs=0.01), 0.0)
    assert drawn["4"][0] == "active" and drawn["4"][2:] == (60.0, pytest.approx(640 / 3, abs=0.01), 180.0)
    page = text(html)
    assert "epoch 2 · 2 active" in page and "Scaling history" in page


def test_an_operator_splits_and_merges_from_the_form(client, operator_user, stream):
    client.force_login(operator_user)
    split = client.post(URL, {"action": "split", "segment": "1", "parts": "3", "epoch": "0"}, HTTP_HX_REQUEST="true")
    fragment = split.content.decode()
    assert "<html" not in fragment and "Epoch 1: sealed 1, made 2, 3, 4." in text(fragment)
    merged = client.post(URL, {"action": "merge", "segment": "2", "parts": "", "epoch": "1"}, HTTP_HX_REQUEST="true")
    assert "Epoch 2: sealed 2, 3, made 5." in text(merged.content.decode())
    stream = Stream.objects.get(pk=stream.pk)
    assert [(s.id, s.lo, s.hi) for s in stream.layout.active] == [
        ("0", 0.0, 0.5),
        ("5", 0.5, pytest.approx(5 / 6)),
        ("4", pytest.approx(5 / 6), 1.0),
    ]
    assert [s.by for s in Scaling.objects.order_by("epoch")] == ["olga", "olga"]


def test_a_stale_form_or_a_merge_without_a_neighbour_is_refused_beside_the_form(client, operator_user, stream):
    client.force_login(operator_user)
    stale = client.post(URL, {"action": "split", "segment": "1", "parts": "2", "epoch": "3"}, HTTP_HX_REQUEST="true")
    assert "scaled since this page was shown (now epoch 0)" in text(stale.content.decode())
    last = client.post(URL, {"action": "merge", "segment": "1", "epoch": "0"}, HTTP_HX_REQUEST="true")
    assert "holds the last keys" in text(last.content.decode())
    bad = client.post(URL, {"action": "split", "segment": "9", "parts": "2", "epoch": "0"}, HTTP_HX_REQUEST="true")
    assert "segment: Select a valid choice" in text(bad.content.decode())
    assert not Scaling.objects.exists()


def test_a_viewer_sees_the_segments_but_no_scale_form(client, plain_user, stream):
    client.force_login(plain_user)
    html = client.get("/streams/shop/orders/").content.decode()
    assert 'id="segments-panel"' in html and 'name="action"' not in html
    refused = client.post(URL, {"action": "split", "segment": "1", "parts": "2", "epoch": "0"})
    assert refused.status_code == 403 and not Scaling.objects.exists()


# -- the scaling policy --------------------------------------------------------------------

RATE_POLICY = {"type": "by_event_rate", "target_rate": 50.0, "scale_factor": 4, "min_segments": 2}


def stored_policy(stream) -> dict:
    return Stream.objects.get(pk=stream.pk).scaling_policy


def policy_words(html: str) -> str:
    """The policy as the panel says it (its rows of words, not the form)."""
    found = re.search(r'<div class="scaling-policy" id="scaling-policy">.*?<dl class="kv">(.*?)</dl>', html, re.S)
    assert found, "no scaling policy in the panel"
    return text(found.group(1))


def field_box(html: str, name: str) -> str:
    """What a person reads in one field of the policy form: its label, its hint or its errors."""
    found = re.search(rf'<div class="field"><label for="id_{name}">.*?</div>', html, re.S)
    assert found, f"no field {name} in the form"
    return text(found.group(0))


def test_the_panel_shows_the_policy_in_words(admin_client, stream):
    page = admin_client.get(PAGE).content.decode()
    assert "epoch 0 · 2 active · scaled by hand only" in text(page)
    # a fixed policy: no rate, factor or cool-down to show
    assert policy_words(page) == "Policy fixed: the stream scales only when an operator scales it Min segments 1"
    services.do_set_scaling_policy(stream, {"type": "fixed", "min_segments": 3})
    page = admin_client.get(PAGE).content.decode()
    assert "scaled by hand only, at least 3 segments" in text(page)
    assert policy_words(page) == (
        "Policy fixed: the stream scales only when an operator scales it "
        "Min segments 3: a stream with fewer active segments splits at the next evaluation"
    )
    services.do_set_scaling_policy(
        stream, {"type": "by_byte_rate", "target_rate": 1500.5, "scale_factor": 4, "min_segments": 2}
    )
    page = admin_client.get(PAGE).content.decode()
    assert "scales by byte rate, 1,500.5 KiB/s a segment, at least 2 segments" in text(page)
    assert policy_words(page) == (
        "Policy by byte rate: a segment over its target rate splits, cold neighbours merge "
        "Target rate 1,500.5 KiB/s per segment "
        "Scale factor 4: a hot segment splits into at most 4 parts "
        "Min segments 2: a stream with fewer active segments splits at the next evaluation; no merge goes below it "
        "Cool-down 10 minutes: a segment made or scaled within it is left alone"
    )


def test_an_operator_changes_the_policy_and_the_row_and_the_api_show_it(client, operator_user, api, stream):
    client.force_login(operator_user)
    # when
    saved = client.post(
        POLICY_URL,
        {"type": "by_event_rate", "target_rate": "1500", "scale_factor": "4", "min_segments": "3"},
        HTTP_HX_REQUEST="true",
    )
    # then: the panel comes back, saying so and showing the new policy (and the form filled with it)
    fragment = saved.content.decode()
    assert saved.status_code == 200 and "<html" not in fragment and 'id="segments-panel"' in fragment
    assert "Scaling policy saved" in text(fragment)
    assert "Target rate 1,500 events/s per segment" in text(fragment)
    assert 'name="target_rate" value="1500"' in fragment
    policy = {"type": "by_event_rate", "target_rate": 1500.0, "scale_factor": 4, "min_segments": 3}
    assert stored_policy(stream) == policy
    assert "scales by event rate, 1,500 events/s a segment, at least 3 segments" in text(fragment)
    assert api.get("/api/v1/streams/shop/orders/").json()["scaling_policy"] == policy
    # and back to fixed, the rate still in its box (a fixed policy does not take it)
    fixed = client.post(
        POLICY_URL,
        {"type": "fixed", "target_rate": "1500", "scale_factor": "2", "min_segments": "1"},
        HTTP_HX_REQUEST="true",
    )
    assert "Scaling policy saved" in text(fixed.content.decode()) and "scaled by hand only" in text(
        fixed.content.decode()
    )
    assert stored_policy(stream) == {}
    answered = api.get("/api/v1/streams/shop/orders/").json()["scaling_policy"]
    assert answered == {"type": "fixed", "scale_factor": 2, "min_segments": 1}


def test_a_form_without_htmx_is_saved_and_redirected_to_the_page(client, operator_user, stream):
    client.force_login(operator_user)
    saved = client.post(
        POLICY_URL, {"type": "by_byte_rate", "target_rate": "20", "scale_factor": "", "min_segments": ""}
    )
    assert saved.status_code == 302 and saved["Location"] == PAGE
    assert stored_policy(stream) == {"type": "by_byte_rate", "target_rate": 20.0, "scale_factor": 2, "min_segments": 1}


@pytest.mark.parametrize(
    ("target_rate", "says"),
    [
        ("0", "must be a number of events/s per segment, above 0 and at most 1e9"),
        ("-1", "must be a number of events/s per segment, above 0 and at most 1e9"),
        ("1e10", "must be a number of events/s per segment, above 0 and at most 1e9"),
        ("", "must be a number of events/s per segment, above 0 and at most 1e9"),
        ("fast", "Enter a number."),
        ("nan", "Enter a number."),
    ],
)
def test_a_bad_target_rate_is_refused_beside_it_and_changes_nothing(client, operator_user, stream, target_rate, says):
    services.do_set_scaling_policy(stream, RATE_POLICY)
    client.force_login(operator_user)
    refused = client.post(
        POLICY_URL,
        {"type": "by_event_rate", "target_rate": target_rate, "scale_factor": "3", "min_segments": "5"},
        HTTP_HX_REQUEST="true",
    )
    fragment = refused.content.decode()
    assert refused.status_code == 200 and "<html" not in fragment
    assert field_box(fragment, "target_rate") == f"Target rate Target rate: {says}"  # the label, then the error
    assert "must be" not in field_box(fragment, "min_segments")  # beside its own field only
    assert "Scaling policy saved" not in text(fragment)
    assert 'name="min_segments" value="5"' in fragment  # what was typed stays, to be corrected
    assert stored_policy(stream) == RATE_POLICY


@pytest.mark.parametrize(
    ("min_segments", "says"),
    [
        ("0", "must be an integer from 1 to 64 (CBR_MAX_SEGMENTS)"),
        ("65", "must be an integer from 1 to 64 (CBR_MAX_SEGMENTS)"),
        ("two", "Enter a whole number."),
        ("2.5", "Enter a whole number."),
    ],
)
def test_a_bad_min_segments_is_refused_beside_it_and_changes_nothing(client, operator_user, stream, min_segments, says):
    services.do_set_scaling_policy(stream, RATE_POLICY)
    client.force_login(operator_user)
    refused = client.post(
        POLICY_URL,
        {"type": "by_event_rate", "target_rate": "10", "scale_factor": "2", "min_segments": min_segments},
        HTTP_HX_REQUEST="true",
    )
    fragment = refused.content.decode()
    assert refused.status_code == 200
    assert field_box(fragment, "min_segments") == f"Min segments Min segments: {says}"
    assert "must be" not in field_box(fragment, "target_rate")
    assert stored_policy(stream) == RATE_POLICY


def test_the_console_refuses_with_the_apis_own_words(client, operator_user, api, stream):
    """One rule, one message: the form's refusal is the one the API's PUT answers."""
    client.force_login(operator_user)
    body = {"type": "by_event_rate", "target_rate": 10, "scale_factor": 17}
    answer = api.put("/api/v1/streams/shop/orders/scaling-policy/", body, format="json").json()
    assert answer["field"] == "scaling_policy.scale_factor"
    refused = client.post(POLICY_URL, {**body, "min_segments": ""}, HTTP_HX_REQUEST="true")
    words = answer["message"].removeprefix("scaling_policy.scale_factor: ")
    assert words.startswith("must be") and field_box(refused.content.decode(), "scale_factor") == (
        f"Scale factor Scale factor: {words}"
    )
    assert stored_policy(stream) == {}


def test_a_refusal_without_htmx_shows_the_page_with_the_error(client, operator_user, stream):
    client.force_login(operator_user)
    refused = client.post(POLICY_URL, {"type": "by_event_rate", "target_rate": "0", "scale_factor": "2"})
    html = refused.content.decode()
    assert refused.status_code == 200 and "<html" in html
    assert field_box(html, "target_rate").endswith(
        "Target rate: must be a number of events/s per segment, above 0 and at most 1e9"
    )
    assert stored_policy(stream) == {}


def test_a_viewer_sees_the_policy_but_no_form_and_is_refused_on_post(client, plain_user, stream):
    services.do_set_scaling_policy(stream, RATE_POLICY)
    client.force_login(plain_user)
    html = client.get(PAGE).content.decode()
    assert "Target rate 50 events/s per segment" in policy_words(html)
    assert 'name="target_rate"' not in html and POLICY_URL not in html
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        refused = client.post(POLICY_URL, {"type": "fixed", "scale_factor": "2", "min_segments": "1"}, **headers)
        assert refused.status_code == 403
    assert stored_policy(stream) == RATE_POLICY
