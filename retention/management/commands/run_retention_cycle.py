"""`manage.py run_retention_cycle [--stream scope/name] [--now ISO8601] [--engine local|spark|auto]`:
one retention cycle now, one line per stream (the truncation and its rule, or why not). The cycle
is recorded as every other (the console's cycle history, `GET /api/v1/retention/cycles/`)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from domain.errors import FieldError
from domain.times import parse_time
from retention.cycle.gathering import streams_with_policy
from retention.cycle.lifecycle import execute
from retention.models import RetentionCycle
from retention.services import check_cycle_clock
from streams.models import Stream


class Command(BaseCommand):
    help = "Run a retention cycle now and print what it truncated, with the rule that decided."

    def add_arguments(self, parser):
        parser.add_argument("--stream", help="only this stream (scope/name)")
        parser.add_argument("--now", help="the cycle's clock, ISO 8601 with a time zone")
        parser.add_argument("--engine", default="auto", choices=["local", "spark", "auto"])
        parser.add_argument("--all", action="store_true", help="also print streams not truncated")

    def handle(self, *args, stream=None, now=None, engine="auto", all=False, **options):
        when = None
        if now is not None:
            try:
                when = parse_time(now, "--now")  # with its offset, and within what UTC holds
            except FieldError as exc:
                raise CommandError(f"--now: {exc.message}") from None
        streams = None
        if stream is not None:
            scope, _, name = stream.partition("/")
            streams = list(streams_with_policy().filter(scope__name=scope, name=name))
            if not streams:
                if Stream.objects.filter(scope__name=scope, name=name).exists():
                    raise CommandError(f"stream {stream} has no retention policy")
                raise CommandError(f"no stream {stream}")

        def report(outcomes) -> None:  # printed as the cycle goes, a chunk of streams at a time
            for outcome in outcomes:
                if outcome.truncation is not None or all:
                    self.stdout.write(outcome.line())

        if when is not None:
            try:
                check_cycle_clock(when, streams[0] if streams else None)
            except FieldError as exc:
                raise CommandError(f"--now: {exc.message}") from None
        cycle = RetentionCycle.objects.create(
            trigger="command", engine=engine, clock=when, stream=streams[0] if streams else None
        )
        execute(cycle, report=report)
