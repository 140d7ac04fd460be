"""The cases of consumption-based retention on scaled streams, as the cycle decides them: records
of the retention set taken in older epochs than the subscribers' cuts, bounds compared across
epochs (docs/design/retention.md, docs/design/stream-scaling.md). Streams are scaled and cuts
released over REST; the cycle is run by the command at chosen times."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import factories
import pytest
from django.core.management import call_command

from streams.models import Stream

pytestmark = pytest.mark.django_db

S = "/api/v1/streams/shop/orders/"
T0 = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def retention_interval(settings):
    settings.CBR_RETENTION_INTERVAL = 5  # every cycle below records the tail


def release(api, group, cut):
    answer = factories.release_over_api(api, group, cut)
    assert answer.status_code == 200, answer.json()


def cycle(seconds):
    out = StringIO()
    call_command("run_retention_cycle", "--now", (T0 + timedelta(seconds=seconds)).isoformat(), stdout=out)
    return out.getvalue().strip()


def make(api, segment_count, policy, groups):
    factories.create_stream_over_api(api, segment_count=segment_count, retention_policy=policy)
    for group in groups:
        factories.create_group_over_api(api, group, retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT")


def test_the_size_example_with_a_merge_between_its_steps(api):
    """docs/design/retention.md's consumption example (size, min 2, max 10, subscribers A and B),
    with the two segments merged into one after step 2: steps 3 to 5 compare records of the first
    epoch with cuts in the second, and the sealed segments retire once the head passes them."""
    make(api, 2, {"limit_type": "size", "min": 2, "max": 10, "consumption_based": True}, ("A", "B"))
    factories.put_in_range(api, 0, 0.5, 2)
    factories.put_in_range(api, 0.5, 1, 2)
    release(api, "A", {"0": 2, "1": 1})
    release(api, "B", {"0": 1, "1": 2})
    assert cycle(1) == "shop/orders: truncated at {'0': 1, '1': 1} (cbr:case-i:slb), reclaimed 2 bytes"
    release(api, "A", {"0": 2, "1": 2})
    release(api, "B", {"0": 2, "1": 2})
    assert cycle(20) == ""

    factories.scale_over_api(api, ["0", "1"], [[0, 1]])  # 2 [0, 1)
    factories.put_in_range(api, 0, 1, 16)  # 20 bytes in all, as in the example
    for group in "AB":
        release(api, group, {"2": 15})  # 0 and 1 read to their end: 19 bytes read
    # kept 1 < min; limit_min is the first epoch's record {0:2, 1:2}, before the SLB
    assert "truncated at {'0': 2, '1': 2, '2': 0} (cbr:case-ii:limit_min)" in cycle(30)
    layout = Stream.objects.get(name="orders").layout
    assert layout.held_ids == ["2"]  # the first epoch is passed whole: retired
    assert api.get(S).json()["head_cut"] == {"2": 0}

    factories.put_in_range(api, 0, 1, 20)  # 40 bytes: the SLB keeps 21 >= max; limit_max is the record of step 3
    assert "truncated at {'0': 2, '1': 2, '2': 16} (cbr:case-iii:limit_max)" in cycle(40)

    factories.put_in_range(api, 0, 1, 20)  # 60 bytes; A and B have read 40: the SLB keeps 20, as much as limit_max
    for group in "AB":
        release(api, group, {"2": 36})
    assert "truncated at {'0': 2, '1': 2, '2': 36} (cbr:case-iii:slb)" in cycle(50)
    assert api.get(S).json()["head_cut"] == {"2": 36}


def time_history(api):
    """A stream of one segment split, then one successor split again, with a tail record at 50,
    120, 180 and 195 s (ages 150, 80, 20 and 5 at 200 s), while subscriber A holds at the head:
    r50 {0:5}; r120 {0:5, 1:7, 2:7}; r180 {…, 2:18, 3:6, 4:6}; r195 {…, 2:19, 3:7, 4:7}. The
    policy gets its max (80 s) only then: with it, these cycles would already truncate."""
    make(api, 1, {"limit_type": "time", "min": 10, "consumption_based": True}, ("A",))
    factories.put_in_range(api, 0, 1, 5)
    assert cycle(50) == ""
    factories.scale_over_api(api, ["0"], [[0, 0.5], [0.5, 1]])  # 1, 2
    factories.put_in_range(api, 0, 0.5, 7)
    factories.put_in_range(api, 0.5, 1, 7)
    assert cycle(120) == ""
    factories.scale_over_api(api, ["1"], [[0, 0.25], [0.25, 0.5]])  # 3, 4
    factories.put_in_range(api, 0, 0.25, 6)
    factories.put_in_range(api, 0.25, 0.5, 6)
    factories.put_in_range(api, 0.5, 1, 11)
    assert cycle(180) == ""
    for lo, hi in [(0, 0.25), (0.25, 0.5), (0.5, 1)]:
        factories.put_in_range(api, lo, hi, 1)
    assert cycle(195) == ""
    assert api.get(S).json()["tail_cut"] == {"2": 19, "3": 7, "4": 7}
    policy = {"limit_type": "time", "min": 10, "max": 80, "consumption_based": True}
    assert api.put(S + "retention-policy/", policy, format="json").status_code == 200


R120 = "{'0': 5, '1': 7, '2': 7, '3': 0, '4': 0}"
R180 = "{'0': 5, '1': 7, '2': 18, '3': 6, '4': 6}"


@pytest.mark.parametrize(
    "slb, cut, rule",
    [
        # the SLB is after the max bound (r120) and not after limit_min (r180): the SLB
        ({"2": 10, "3": 3, "4": 3}, "{'0': 5, '1': 7, '2': 10, '3': 3, '4': 3}", "cbr:case-i:slb"),
        # limit_min (r180) lies before the SLB: limit_min
        ({"2": 19, "3": 7, "4": 7}, R180, "cbr:case-ii:limit_min"),
        # limit_min overlaps the SLB (ahead on 2, behind on 3 and 4): the newest record before it
        ({"2": 10, "3": 7, "4": 7}, R120, "cbr:case-iv:retention_set"),
        # the SLB is still in the first epoch, before the max bound: limit_max (r120) is forced
        ({"0": 3}, R120, "cbr:case-iii:limit_max"),
        # the SLB overlaps the max bound (ahead on 2, behind on 1): the max bound is forced
        ({"1": 5, "2": 9}, R120, "cbr:case-v:max_bound"),
    ],
    ids=["i", "ii", "iv", "iii", "v"],
)
def test_each_time_case_on_a_stream_split_twice(api, slb, cut, rule):
    time_history(api)
    release(api, "A", slb)
    said = cycle(200)
    assert said.startswith(f"shop/orders: truncated at {cut} ({rule})"), said
