"""`manage.py seed_demo`: a few streams with events, policies, reader groups and truncations, so a
new console shows something real. Everything goes through the paths a deployment's producers,
consumers and cycles take (publish, read, ack, checkpoints, truncation cuts, retention cycles),
so every number on every page agrees. Safe to run twice: existing demo streams are left as they
are."""

from __future__ import annotations

import random
from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils import timezone

from domain.events import EventIn
from domain.policy_spec import parse_policy
from groups import consuming
from groups.acknowledgement import check_truncation_cut, publish_cut
from groups.models import ReaderGroup, Subscription
from groups.reader_groups import do_create_reader_group
from retention import services as retention_services
from retention.cycle.running import run_cycle
from streams import logs, services
from streams.models import Scope, Stream

DEMO = [
    (
        "payments",
        "transactions",
        4,
        {
            "limit_type": "size",
            "min": 200_000,
            "max": 900_000,
            "consumption_based": True,
            "subscriber_timeout_s": 3600,
            "fallback_after_s": 86_400,
        },
        6000,
    ),
    ("payments", "refunds", 2, {"limit_type": "time", "min": 3600, "max": 7 * 86_400, "consumption_based": True}, 800),
    ("iot", "device-state", 3, {"limit_type": "time", "min": 86_400}, 4000),
    ("iot", "telemetry", 8, {"limit_type": "size", "min": 1_000_000}, 12_000),
    ("web", "clickstream", 2, None, 2500),
]


def _consume(group, count: int) -> None:
    """A consumer of `group` reads and acknowledges `count` events (fewer if there are not as
    many), through the same functions the read and ack endpoints call."""
    left = count
    while left > 0:
        deliveries = consuming.read(group, min(left, 1000), consumer="demo-consumer").deliveries
        if not deliveries:
            return
        consuming.ack(group, [d["delivery_id"] for d in deliveries])
        left -= len(deliveries)


def history_step() -> timedelta:
    """The time between two of the replayed cycles: one retention interval."""
    return timedelta(seconds=settings.CBR_RETENTION_INTERVAL + 1)


def _backdate(rows, at) -> None:
    """Rows made now, dated `at` (`created_at` is set on creation: an update moves it)."""
    rows.update(created_at=at)


class Command(BaseCommand):
    help = "Create demo streams with events and retention policies."

    def _replay_cycles(self, stream, rng):
        """Two subscribers consume at their own pace, as consumers over REST would (read, ack,
        then a checkpoint or a published truncation cut), while seven past retention cycles run
        and producers keep publishing, so the stream page shows a history whose every number
        follows from what happened: its rules, a retention set and a size chart."""
        billing = do_create_reader_group(
            scope="payments", name="billing", streams=[stream], retention_type="AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT"
        )
        ledger = do_create_reader_group(
            scope="payments", name="ledger", streams=[stream], retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT"
        )
        _backdate(ReaderGroup.objects.filter(pk__in=[billing.pk, ledger.pk]), self.history_start)
        _backdate(Subscription.objects.filter(reader_group__in=[billing, ledger]), self.history_start)
        log = logs.stream_log(stream)
        step = history_step()
        start = self.history_start + step
        for k in range(7):
            _consume(billing, 1400)
            consuming.do_checkpoint(billing, f"demo-{k}")  # publishes billing's cut: its floors
            _consume(ledger, 900)
            head = log.head_cut()
            floors = consuming.current_floors(ledger)[stream.full_name]
            cut = {seg: max(offset, head[seg]) for seg, offset in floors.items()}  # what a manual consumer sends
            publish_cut(*check_truncation_cut(ledger, {"stream": stream.full_name, "stream_cut": cut}))
            for outcome in run_cycle(now=start + k * step, streams=[stream], trigger="command", engine="local"):
                if outcome.truncation is not None:
                    self.stdout.write(f"  {outcome.line()}")
            services.do_publish(
                stream,
                [
                    EventIn(
                        payload=f'{{"n": {k}-{i}, "note": "{"y" * rng.randint(20, 120)}"}}'.encode(),
                        routing_key=f"key-{rng.randint(0, 200)}".encode(),
                    )
                    for i in range(1500)
                ],
            )

    def handle(self, *args, **options):
        rng = random.Random(7)
        # the demo's past: its streams and groups made before the first cycle it replays, so no
        # history on a page is older than what it is the history of
        self.history_start = timezone.now() - 8 * history_step()
        for scope, name, segments, policy, count in DEMO:
            if Stream.objects.filter(scope__name=scope, name=name).exists():
                self.stdout.write(f"{scope}/{name} exists, left as it is")
                continue
            stream = retention_services.do_create_stream(
                scope=scope,
                name=name,
                segment_count=segments,
                policy=parse_policy(policy) if policy else None,
                description=f"demo stream: {name.replace('-', ' ')}",
            )
            _backdate(Stream.objects.filter(pk=stream.pk), self.history_start)
            _backdate(Scope.objects.filter(pk=stream.scope_id, created_at__gt=self.history_start), self.history_start)
            for start in range(0, count, 500):
                batch = [
                    EventIn(
                        payload=f'{{"n": {i}, "amount": {rng.randint(1, 9999)}, "note": "{"x" * rng.randint(10, 200)}"}}'.encode(),
                        routing_key=f"key-{rng.randint(0, 200)}".encode(),
                        key=f"id-{i % 300}".encode(),
                    )
                    for i in range(start, min(start + 500, count))
                ]
                services.do_publish(stream, batch)
            if name == "transactions":
                self._replay_cycles(stream, rng)
            if name == "clickstream":  # a plain reader (no hold on retention) part of the way through
                analytics = do_create_reader_group(scope="web", name="analytics", streams=[stream])
                _consume(analytics, 1800)
            logs.refresh_segments(stream)
            self.stdout.write(f"created {scope}/{name}: {count} events on {segments} segments")
