"""`manage.py restore_from_tier [--stream scope/name …]`: after a host lost its data directory,
rebuild every stream's segments from long-term storage and the database
(`streams.tiering.restore`, with what `retention.restoring.known_of` gathers), and print, stream
by stream and segment by segment, what came back and what was lost (what had not been sealed
and copied). Segments that still have chunks on disk are left as they are."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from retention.restoring import known_of
from store.tier.base import TierError
from streams import tiering
from streams.models import Stream


class Command(BaseCommand):
    help = (
        "Rebuild lost segments from long-term storage and print what was lost. "
        "Stop the web server and the workers first."
    )

    def add_arguments(self, parser):
        parser.add_argument("--stream", action="append", help="only this stream (scope/name); repeatable")

    def handle(self, *args, stream=None, **options):
        if tiering.tier() is None:
            raise CommandError("no long-term storage is configured (CBR_TIER_URL): nothing to restore from")
        streams = list(Stream.objects.select_related("scope").order_by("scope__name", "name"))
        if stream:
            wanted = set(stream)
            streams = [s for s in streams if s.full_name in wanted]
            missing = wanted - {s.full_name for s in streams}
            if missing:
                raise CommandError(f"no stream {', '.join(sorted(missing))}")
        lost_total = restored = 0
        for s in streams:
            try:
                report = tiering.restore(s, known_of(s))
            except TierError as e:
                raise CommandError(f"{s.full_name}: the tier could not give it back ({e}); run it again") from e
            if report.files:
                self.stdout.write(f"{s.full_name}: {report.files} files beside the log brought back")
            for seg in report.segments:
                if seg.skipped:
                    self.stdout.write(f"{s.full_name} segment {seg.segment}: left, {seg.skipped}")
                    continue
                lost = sum(to - at for at, to in seg.lost)
                lost_total += lost
                restored += seg.chunks
                ranges = ", ".join(f"[{at}, {to})" for at, to in seg.lost) or "none"
                self.stdout.write(
                    f"{s.full_name} segment {seg.segment}: {seg.chunks} chunks restored, head {seg.head}, "
                    f"appends go on at {seg.tail}; lost {lost} events: {ranges}"
                )
        self.stdout.write(f"restored {restored} chunks; lost at least {lost_total} events")
