"""Beat's schedules as the console edits them. The settings declare each periodic task with its
default interval (`CELERY_BEAT_SCHEDULE`); an interval or an on/off an operator set in the
console is theirs from then on: beat, when it starts, writes the settings' values only into
entries nobody edited (their description does not start with `EDITED`)."""

from __future__ import annotations

from domain.errors import FieldError

EDITED = "cbr:edited"  # the description of an entry an operator changed: "cbr:edited by ada at …"
MAX_INTERVAL_S = 7 * 86400


def edited_note(user: str, at_iso: str) -> str:
    return f"{EDITED} by {user} at {at_iso}"


def is_edited(description: str) -> bool:
    return description.startswith(EDITED)


def check_interval(value: object) -> int:
    """An interval in whole seconds, 1 s to a week."""
    try:
        seconds = int(str(value).strip())
    except ValueError:
        raise FieldError("every_s", "must be a whole number of seconds") from None
    if not 1 <= seconds <= MAX_INTERVAL_S:
        raise FieldError("every_s", f"must be between 1 and {MAX_INTERVAL_S} seconds")
    return seconds
