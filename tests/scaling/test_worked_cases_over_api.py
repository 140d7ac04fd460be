"""The three worked cases of docs/design/stream-scaling.md (Pravega's retention tests with scaled
streams), end to end over REST: the streams are scaled by `POST …/scale/`, the events published,
the subscribers' cuts released by their reader groups, and the cycle run by the command."""

from datetime import UTC, datetime
from io import StringIO

import factories
import pytest
from django.core.management import call_command

from streams.models import Segment, Stream

pytestmark = pytest.mark.django_db

S = "/api/v1/streams/shop/orders/"
T0 = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)


def cycle(at=T0):
    out = StringIO()
    call_command("run_retention_cycle", "--now", at.isoformat(), stdout=out)
    return out.getvalue().strip()


def make(api, segment_count, policy, groups=("A", "B")):
    factories.create_stream_over_api(api, segment_count=segment_count, retention_policy=policy)
    for group in groups:
        factories.create_group_over_api(api, group, retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT")


def test_case_1_two_subscribers_across_three_epochs(api):
    make(api, 3, {"limit_type": "size", "min": 0, "max": 1000, "consumption_based": True})
    third, sixth = 1 / 3, 1 / 6
    factories.put_in_range(api, 0, third, 1)
    factories.put_in_range(api, third, 2 * third, 1)
    factories.put_in_range(api, 2 * third, 1, 2)
    factories.scale_over_api(api, ["0"], [[0, sixth], [sixth, third]])  # 3, 4
    factories.put_in_range(api, 0, sixth, 1)
    factories.put_in_range(api, sixth, third, 1)
    factories.scale_over_api(api, ["1", "2", "4"], [[sixth, 1]])  # 5
    factories.put_in_range(api, sixth, 1, 2)
    factories.scale_over_api(api, ["3", "5"], [[0, 1]])  # 6
    factories.put_in_range(api, 0, 1, 2)
    detail = api.get(S).json()
    assert detail["tail_cut"] == {"6": 2} and detail["epoch"] == 3
    ranges = {s["id"]: (s["key_range"], s["sealed"]) for s in detail["segments"]}
    assert ranges["5"] == ([sixth, 1], True) and ranges["6"] == ([0, 1], False)

    assert factories.release_over_api(api, "A", {"0": 1, "5": 0}).status_code == 200
    assert factories.release_over_api(api, "B", {"0": 1, "2": 1, "5": 0}).status_code == 200
    # the bound {0:1, 2:1, 5:0}, as a cut of every segment: what A and B have read of 0, 1 and 2
    assert cycle() == (
        "shop/orders: truncated at {'0': 1, '1': 1, '2': 1, '3': 0, '4': 0, '5': 0, '6': 0} (cbr:case-i:slb),"
        " reclaimed 3 bytes"
    )

    # shown as the API shows cuts: segment 0, read to its end, passes on to its successors 3 and 4
    detail = api.get(S).json()
    assert detail["head_cut"] == {"2": 1, "3": 0, "4": 0, "5": 0}
    # segments 0 and 1 lie wholly before the bound: retired; the others hold what B has not read
    assert not Segment.objects.filter(stream__name="orders", segment_id__in=["0", "1"]).exists()
    layout = Stream.objects.get(name="orders").layout
    assert layout["0"].retired is not None and layout["1"].retired is not None and layout["2"].retired is None
    assert [s["id"] for s in detail["segments"]] == ["2", "3", "4", "5", "6"]


def split_and_merge_to_ten(api):
    """Case 2's stream: 0 [0,½) 1 [½,1) → 2 [0,.6) 3 [.6,1) → 3 into 4, 5 → 4, 5 into 6 → 2, 6
    into 7, 8, 9 → 7, 8, 9 into 10; every sealed segment holds one event, the tail two."""
    make_ranges = [
        (["0", "1"], [[0, 0.6], [0.6, 1]]),
        (["3"], [[0.6, 0.8], [0.8, 1]]),
        (["4", "5"], [[0.6, 1]]),
        (["2", "6"], [[0, 0.3], [0.3, 0.6], [0.6, 1]]),
        (["7", "8", "9"], [[0, 1]]),
    ]
    factories.put_in_range(api, 0, 0.5, 1)
    factories.put_in_range(api, 0.5, 1, 1)
    for seal, new_ranges in make_ranges:
        factories.scale_over_api(api, seal, new_ranges)
        for lo, hi in new_ranges:
            factories.put_in_range(api, lo, hi, 2 if new_ranges == [[0, 1]] else 1)
    assert api.get(S).json()["tail_cut"] == {"10": 2}


@pytest.mark.parametrize(
    "policy",
    [
        {"limit_type": "size", "min": 0, "max": 1000, "consumption_based": True},
        {"limit_type": "time", "min": 0, "consumption_based": True},
    ],
    ids=["size 0-1000", "time 0-inf"],
)
def test_case_2_a_cut_with_a_hole_is_refused_and_the_bound_is_in_the_first_epoch(api, policy):
    make(api, 2, policy)
    split_and_merge_to_ten(api)

    refused = factories.release_over_api(api, "A", {"0": 1, "3": 1})
    assert refused.status_code == 400 and refused.json()["field"] == "stream_cut"
    assert "nothing holds [0.5, 0.6)" in refused.json()["message"]
    group = api.get("/api/v1/reader-groups/shop/A/").json()
    assert group["streams"][0]["acknowledgement_cut"] == {"0": 0, "1": 0}  # where it was: nothing of it kept
    assert factories.release_over_api(api, "A", {"0": 1, "2": 0, "8": 0, "9": 1}).status_code == 200
    assert factories.release_over_api(api, "B", {"1": 1, "2": 0}).status_code == 200
    said = cycle()
    assert "truncated at {'0': 1, '1': 1, '2': 0, '3': 0, " in said and "'10': 0} (cbr:case-i:slb)" in said
    # the bound {0:1, 1:1}: both read to their end, shown as their successors not started yet
    assert api.get(S).json()["head_cut"] == {"2": 0, "3": 0}
    assert not Segment.objects.filter(stream__name="orders", segment_id__in=["0", "1"]).exists()


def test_case_3_no_subscriber_and_time_min_0_truncates_at_the_tail(api):
    make(api, 2, {"limit_type": "time", "min": 0}, groups=())
    split_and_merge_to_ten(api)
    said = cycle()
    assert "truncated at {'0': 1, '1': 1, '2': 1, '3': 1, " in said and "'10': 2} (time:limit_min)" in said
    detail = api.get(S).json()
    assert detail["head_cut"] == {"10": 2} and detail["event_count"] == 0
    # every sealed segment was wholly before the tail: all retired
    assert [s["id"] for s in detail["segments"]] == ["10"]
    assert list(Segment.objects.filter(stream__name="orders").values_list("segment_id", flat=True)) == ["10"]
