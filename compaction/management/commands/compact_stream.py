"""`manage.py compact_stream scope/name [--seal]`: one compaction of a stream now (`--seal` first
seals the active chunks, for tests and operators). Prints what the run did."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from compaction.models import CompactionRun
from compaction.runs import CompactionBusy, execute
from streams.models import Stream


class Command(BaseCommand):
    help = "Compact a stream now."

    def add_arguments(self, parser):
        parser.add_argument("stream", help="scope/name")
        parser.add_argument("--seal", action="store_true", help="seal the active chunks first")

    def handle(self, *args, stream: str, seal: bool, **options):
        scope, _, name = stream.partition("/")
        row = Stream.objects.filter(scope__name=scope, name=name).first()
        if row is None:
            raise CommandError(f"no stream {stream}")
        if not row.is_compacted:
            raise CommandError(f"{stream} is not compacted (cleanup_policy {row.cleanup_policy!r})")
        run = CompactionRun.objects.create(stream=row, trigger="command")
        try:
            execute(run, seal=seal)
        except CompactionBusy:
            raise CommandError(f"a compaction of {stream} is running") from None
        if run.state == CompactionRun.State.SKIPPED:
            self.stdout.write(f"{stream}: nothing new to compact")
            return
        self.stdout.write(
            f"{stream}: generation {run.generation}, horizon {run.horizon}: {run.events_in} events in, "
            f"{run.events_out} out ({run.keys} keys); dropped {run.keyless_dropped} keyless, "
            f"{run.tombstones_dropped} tombstones, {run.marked_by_retention} by retention; "
            f"{run.bytes_before} → {run.bytes_after} bytes in {run.duration_s:.1f} s"
        )
