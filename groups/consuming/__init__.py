"""Consuming through a reader group (docs/design/acks.md): read, ack, nack, dead letters, checkpoints.
The only place that moves a group's floors; the views, tasks and the console call these.

The rules live in `domain.acks` and run in Redis (`groups.ack_tracker`); this module
joins them to the segment store (what to hand out, the events themselves) and to the database
(the persisted floors, checkpoints and acknowledgement cuts).

A delivery id is `"<incarnation>-<stream>-<segment>-<offset>-<epoch>"` (`streams.wire`): it names
the subscription it belongs to (a number from its random `state_key`, so no other subscription,
here or in a deployment whose database gave out the same ids, shares it), where the event is, and
which delivery of it this is (an older epoch is a lease that expired and was handed to someone
else: its acknowledgement is refused).
"""

from groups.consuming.acking import AckOutcome, ack, nack
from groups.consuming.answers import ReadResult
from groups.consuming.checkpoints import (
    AUTO_PREFIX,
    check_checkpoint_name,
    checkpoint_interval_s,
    current_floors,
    do_checkpoint,
    do_delete_checkpoint,
    do_release_checkpoint,
    drop_expired_persisted,
    get_checkpoint,
    maybe_checkpoint,
    periodic_checkpoints,
)
from groups.consuming.dead_letters import dead_letter_name
from groups.consuming.floors import (
    Slot,
    forget_trackers,
    group_and_slots,
    group_changed,
    last_seen,
    mark_seen,
    slots,
    tracker_names,
)
from groups.consuming.reading import ReadArgs, read, read_many, read_woken

__all__ = [
    "AUTO_PREFIX",
    "AckOutcome",
    "ReadArgs",
    "ReadResult",
    "Slot",
    "ack",
    "check_checkpoint_name",
    "checkpoint_interval_s",
    "current_floors",
    "dead_letter_name",
    "do_checkpoint",
    "do_delete_checkpoint",
    "do_release_checkpoint",
    "drop_expired_persisted",
    "get_checkpoint",
    "forget_trackers",
    "group_and_slots",
    "group_changed",
    "last_seen",
    "mark_seen",
    "maybe_checkpoint",
    "nack",
    "periodic_checkpoints",
    "read",
    "read_many",
    "read_woken",
    "slots",
    "tracker_names",
]
