"""What the stream layer tells the layers above it, without importing them (docs/architecture.md).

Each signal is sent by this app and received by a higher one, which connects its receiver when
Django starts (its AppConfig.ready):

- `holds_released(streams=[Stream, …])`: subscribers moved their acknowledgement cuts forward,
  or stopped holding (deleted, no longer subscribers), inside the transaction that did it. The
  retention app rechecks the full ones (`retention.tasks.recheck_full_streams`).
- `delayed_bucket_sealed(stream=Stream)`: a publish sealed the stream's mutable delayed bucket;
  `streams.tasks` queues its snapshot now instead of at the next beat.
- `stream_deleted(stream=Stream, at=datetime)`: inside the transaction that deletes the stream,
  before its row goes. The reader groups' app records the removal in every group that read it
  and forgets their trackers on it once the deletion commits
  (`groups.reader_groups.forget_deleted_stream`).
- `stream_scaled(stream=Stream)`: inside the transaction of a scale (`streams.scaling`), once the
  new epoch is written. Reads waiting in any process take their groups as they are now when
  next woken, with the new segments (`groups.reader_groups.take_new_segments`).
- `segments_retired(retired={stream id: [segment ids]})`: inside the transaction that retires
  sealed segments retention passed whole (`streams.scaling.retire_passed_many`). The reader
  groups' app drops its positions and trackers on them (`groups.reader_groups.forget_retired_segments`).
"""

from django.dispatch import Signal

holds_released = Signal()
delayed_bucket_sealed = Signal()
stream_deleted = Signal()
stream_scaled = Signal()
segments_retired = Signal()
