"""`manage.py autoscale [--stream scope/name]`: one auto-scaling evaluation now (beat runs it every
minute, `streams.autoscaling`): one line per scale it made, with its rule and the rates."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from streams.autoscaling import autoscale
from streams.models import Stream


class Command(BaseCommand):
    help = "Evaluate the streams' scaling policies now and make the scales they call for."

    def add_arguments(self, parser):
        parser.add_argument("--stream", help="only this stream, scope/name")

    def handle(self, *args, stream: str | None = None, **options):
        row = None
        if stream is not None:
            scope, _, name = stream.partition("/")
            row = Stream.objects.select_related("scope").filter(scope__name=scope, name=name).first()
            if row is None:
                raise CommandError(f"--stream: no stream {stream}")
        for scaling in autoscale(row):
            rates = "; ".join(
                f"{sid}: " + ", ".join(f"{w} {v:g}/s" for w, v in r.items()) for sid, r in scaling.rates.items()
            )
            self.stdout.write(f"{scaling.stream.full_name}: epoch {scaling.epoch}: {scaling.rule} [{rates}]")
