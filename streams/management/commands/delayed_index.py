"""`manage.py delayed_index --stream scope/name [--recover | --replay]`: show a stream's delayed
index, or rebuild it: `--recover` from its snapshots (what maintenance does after Redis lost the
index; also brings in a stream whose delayed events predate the index), `--replay` from the
whole stream (the fallback when no snapshot can be trusted)."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from streams.delaying import buckets, stream_index
from streams.models import DelayedBucket, DelayedIndex, Stream


class Command(BaseCommand):
    help = "Show or rebuild a stream's delayed index."

    def add_arguments(self, parser):
        parser.add_argument("--stream", required=True, help="scope/name")
        what = parser.add_mutually_exclusive_group()
        what.add_argument("--recover", action="store_true", help="rebuild from the snapshots")
        what.add_argument("--replay", action="store_true", help="rebuild by replaying the stream")

    def handle(self, *args, stream: str, recover: bool, replay: bool, **options):
        scope, _, name = stream.partition("/")
        row = Stream.objects.filter(scope__name=scope, name=name).first()
        if row is None:
            raise CommandError(f"--stream: no stream {stream}")
        now_ms = int(time.time() * 1000)
        if recover or replay:
            DelayedIndex.objects.get_or_create(stream=row)
            with buckets.maintenance_lock(row) as got:
                if not got:
                    raise CommandError("another process is maintaining this index; try again shortly")
                started = time.monotonic()
                done = buckets.replay(row, now_ms) if replay else buckets.recover(row, now_ms)
                for gen in stream_index.index_of(row).sealing():
                    buckets.seal(row, gen)
            self.stdout.write(
                f"{'replayed' if replay else 'recovered'} in {time.monotonic() - started:.2f} s: "
                f"{done['buckets']} buckets loaded, {done['replayed']} indexes re-read"
            )
        counts = stream_index.index_of(row).counts()
        rows = DelayedBucket.objects.filter(stream=row)
        self.stdout.write(
            f"{stream}: {len(rows)} sealed buckets holding "
            f"{sum(r.index_count for r in rows)} indexes; in Redis: {counts}"
        )
