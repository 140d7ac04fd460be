""" "Why is this stream not truncated?": the decision a cycle would make now, read only, agrees
with the cycle that then runs; it names the subscriber holding data back and by how much, and
the stream page shows it."""

from datetime import timedelta

import factories
import pytest
from django.utils import timezone
from page_text import text

from domain.policy_spec import parse_policy
from groups.models import ReaderGroup
from retention import services as retention_services
from retention.cycle.running import run_cycle
from retention.explain import explain
from retention.models import TruncationRecord
from streams import logs

pytestmark = pytest.mark.django_db


@pytest.fixture
def stream(data_dir, settings):
    settings.CBR_RETENTION_INTERVAL = 1
    policy = parse_policy({"limit_type": "size", "min": 0, "consumption_based": True})
    stream = retention_services.do_create_stream(scope="shop", name="orders", policy=policy)
    factories.publish(stream, 10, b"x" * 100)
    return stream


def test_the_explanation_names_the_holder_and_agrees_with_the_cycle(stream):
    factories.subscribe(stream, "billing", {"0": 3})
    t0 = timezone.now()
    why = explain(stream, t0)
    assert TruncationRecord.objects.count() == 0 and logs.stream_log(stream).head_cut() == {"0": 0}  # read only
    assert why.truncates and why.decision.cut == {"0": 3} and why.decision.rule == "cbr:case-i:slb"
    assert (why.reclaimed.events, why.reclaimed.bytes) == (3, 300)
    assert why.limits_alone.cut == {"0": 10}  # min 0: the limits alone release all that is recorded
    assert why.holder is not None and why.holder.name == "shop/billing"
    assert (why.held.events, why.held.bytes) == (7, 700)

    run_cycle(now=t0, streams=[stream], trigger="command", engine="local")
    record = TruncationRecord.objects.get()
    assert (record.rule, record.after_cut) == (why.decision.rule, dict(why.decision.cut))

    after = explain(stream, t0 + timedelta(seconds=2))
    assert not after.truncates and after.holder.name == "shop/billing" and after.held.events == 7
    factories.subscribe(stream, "billing", {"0": 10})  # it caught up
    caught_up = explain(stream, t0 + timedelta(seconds=2))
    assert caught_up.truncates and caught_up.holder is None and caught_up.reclaimed.events == 7


def test_a_stale_subscriber_holds_nothing_and_the_page_says_who_holds(stream, admin_client):
    stream.retention_policy.subscriber_timeout_s = 3600
    stream.retention_policy.save()
    factories.subscribe(stream, "billing", {"0": 3})
    factories.subscribe(stream, "audit", {"0": 1}, acknowledged_at=timezone.now() - timedelta(days=30))
    t0 = timezone.now()
    run_cycle(now=t0, streams=[stream], trigger="command", engine="local")
    page = text(admin_client.get("/streams/shop/orders/").content.decode())
    assert "Next retention cycle" in page, page
    assert "Would not truncate : the rule's cut 0:3 is at the head already" in page  # the first cycle truncated there
    assert "shop/billing holds back 7 events (700 bytes) that the limits alone would release" in page
    assert "shop/audit (stale: holds nothing)" in page and "shop/billing (active)" in page


def test_no_policy_no_explanation(data_dir, admin_client):
    stream = factories.make_stream("plain")
    assert explain(stream) is None
    assert "Next retention cycle" not in text(admin_client.get("/streams/shop/plain/").content.decode())


def test_a_groups_own_subscriber_timeout_wins_over_the_policys_and_the_page_says_so(stream, admin_client):
    """PDP-47's open question 3: a reader group's `subscriber_timeout_s` wins over its stream's
    policy, shorter or longer; the decision, the cycle's record and the stream page show it."""
    stream.retention_policy.subscriber_timeout_s = 86400
    stream.retention_policy.save()
    t0 = timezone.now()
    factories.subscribe(stream, "billing", {"0": 3}, acknowledged_at=t0)
    ReaderGroup.objects.filter(name="billing").update(subscriber_timeout_s=60)
    assert "shop/billing" in explain(stream, t0 + timedelta(seconds=30)).active
    stale = explain(stream, t0 + timedelta(seconds=61))  # by its own 60 s; the policy's day would hold
    assert stale.active == () and stale.decision.rule == "none:no-active-subscriber" and not stale.truncates
    page = text(admin_client.get("/streams/shop/orders/").content.decode())
    assert "shop/billing (active; its group's own subscriber timeout, 1 min)" in page, page

    run_cycle(now=t0 + timedelta(seconds=30), streams=[stream], trigger="command", engine="local")
    (weighed,) = TruncationRecord.objects.get().subscribers
    assert (weighed["name"], weighed["timeout_s"]) == ("shop/billing", 60)

    # longer than the policy's: the group stays active where the policy alone would make it stale
    stream.retention_policy.subscriber_timeout_s = 10
    stream.retention_policy.save()
    ReaderGroup.objects.filter(name="billing").update(subscriber_timeout_s=3600)
    assert "shop/billing" in explain(stream, t0 + timedelta(seconds=61)).active
    ReaderGroup.objects.filter(name="billing").update(subscriber_timeout_s=None)  # the policy's again
    assert explain(stream, t0 + timedelta(seconds=61)).active == ()
