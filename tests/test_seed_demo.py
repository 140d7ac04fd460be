"""The demo `make run` loads is made through the real paths, so its numbers agree: every
truncation reclaimed something, no subscriber's cut is ahead of its group's floor, and neither the
lag nor what a cut holds back exceeds the events a stream holds."""

from io import StringIO

import pytest
from django.core.management import call_command

from groups import consuming
from groups.models import ReaderGroup, Subscription
from groups.projections.lag import group_state
from groups.projections.overview import totals_by_stream
from retention.models import TruncationRecord
from retention.projections import events_after
from streams import logs
from streams.models import Stream

pytestmark = pytest.mark.django_db


def test_the_demo_agrees_with_itself(data_dir):
    call_command("seed_demo", stdout=StringIO())
    transactions = Stream.objects.get(scope__name="payments", name="transactions")
    records = list(TruncationRecord.objects.filter(stream=transactions))
    assert len(records) >= 3
    assert all(r.reclaimed_bytes > 0 and r.after_cut != r.before_cut for r in records), [
        (r.rule, r.reclaimed_bytes) for r in records
    ]
    assert {r.rule.split(":")[0] for r in records} <= {"cbr"}  # the consumption-based rules decided

    groups = ReaderGroup.objects.filter(subscription__stream__isnull=False).distinct()
    assert {str(g) for g in groups} == {"payments/billing", "payments/ledger", "web/analytics"}
    for group in groups:
        floors = consuming.current_floors(group)
        lags = totals_by_stream(group_state(group))
        for sub in Subscription.objects.filter(reader_group=group).select_related("stream__scope"):
            log = logs.stream_log(sub.stream)
            head, tail = log.head_cut(), log.tail_cut()
            held = sum(tail[s] - head[s] for s in tail)
            lag = lags[sub.stream.full_name].lag_events
            assert 0 <= lag <= held, (str(group), lag, held)
            assert lag == events_after(floors[sub.stream.full_name], head, tail)
            if sub.acknowledgement_cut is not None:
                cut = sub.acknowledgement_cut
                assert all(cut[s] <= floors[sub.stream.full_name][s] for s in cut), (str(group), cut, floors)
                assert lag <= events_after(cut, head, tail) <= held
    billing = Subscription.objects.get(reader_group__name="billing")
    assert billing.acknowledgement_cut == consuming.current_floors(billing.reader_group)["payments/transactions"]

    # no history older than what it is the history of
    first = min(r.created_at for r in records)
    assert transactions.created_at < first and transactions.scope.created_at <= transactions.created_at
    for sub in Subscription.objects.filter(stream=transactions).select_related("reader_group"):
        assert sub.created_at < first and sub.reader_group.created_at < first

    call_command("seed_demo", stdout=StringIO())  # a second run leaves the demo as it is
    assert TruncationRecord.objects.filter(stream=transactions).count() == len(records)
