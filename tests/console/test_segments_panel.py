"""The stream page's Segments panel: the key space over epochs as a picture, the segments held,
the scale form (operators: split, merge with the next, refusals beside the form) and the history."""

import re

import factories
import pytest
from page_text import text

from streams import logs
from streams.models import Scaling, Stream
from streams.scaling import do_scale

pytestmark = pytest.mark.django_db

URL = "/streams/shop/orders/segments/"


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
