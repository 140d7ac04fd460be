"""The retention of dead-letter streams (`<stream>-dlq`, made by the reader groups' app the first
time an event is dead-lettered): made as any stream of their scope, so a scope's default policy
applies to them; without one, a time limit of `CBR_DLQ_RETENTION_S` (7 days by default, Kafka's
default retention), so that dead letters nobody looks at do not grow for ever. 0 leaves them
without a policy (kept until deleted). An operator changes a dead-letter stream's policy as any
stream's."""

from __future__ import annotations

from django.conf import settings

from domain.policy_spec import parse_policy
from domain.scope_defaults import RETENTION_POLICY
from retention.scope_defaults import defaults_of
from retention.services import do_create_stream
from streams.models import Stream


def create_dead_letter_stream(*, scope: str, name: str, segment_count: int, description: str) -> Stream:
    policy = None
    seconds = settings.CBR_DLQ_RETENTION_S
    if defaults_of(scope).get(RETENTION_POLICY) is None and seconds:
        policy = parse_policy({"limit_type": "time", "min": seconds})
    return do_create_stream(scope=scope, name=name, segment_count=segment_count, description=description, policy=policy)
