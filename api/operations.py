"""What each API operation is for, as Swagger shows it (drf-spectacular postprocessing hook):
a summary, a description, a tag, and examples for the bodies that matter. One table, keyed by
drf-spectacular's operation ids like `api/schema.py`'s error table; a test holds every operation
to having an entry (tests/api/test_schema_descriptions.py), so a new endpoint comes with its
explanation.
"""

from __future__ import annotations

# operation id -> (tag, summary, description). The descriptions are Markdown (Swagger renders it).
OPERATIONS: dict[str, tuple[str, str, str]] = {
    # -- access ---------------------------------------------------------------------------------
    "auth_token_create": (
        "Access",
        "Get an API token",
        "Exchange a username and password for the user's token; send it as `Authorization: Token …` on every "
        "request. Failed sign-ins are counted per address and per username (`CBR_LOGIN_FAILURES`): past the "
        "limit, 429 with `Retry-After`, even with the right password.",
    ),
    "api_keys_list": (
        "Access",
        "List API keys",
        "The API keys you may see (admins: all; others: their own), newest first. The secret is never shown again.",
    ),
    "api_keys_create": (
        "Access",
        "Create an API key",
        "A key scoped to one reader group (`kind: reader_group`: read, ack, nack, checkpoints, cuts of that "
        "group) or to publishing on named streams (`kind: publish`). The answer carries the secret **once**; "
        "it is stored hashed. Send it as `Authorization: Api-Key …`.",
    ),
    "api_keys_retrieve": ("Access", "One API key", "A key's scope, creator, creation and last use; never its secret."),
    "api_keys_destroy": ("Access", "Revoke an API key", "Every web process refuses the key at once after this answer."),
    # -- streams --------------------------------------------------------------------------------
    "streams_list": (
        "Streams",
        "List streams",
        "Paginated (`limit`, `offset`), with each stream's cuts, sizes and retention policy. `scope` keeps one "
        "scope's streams; `search` keeps those whose scope or name contains it.",
    ),
    "streams_create": (
        "Streams",
        "Create a stream",
        "A stream of `segment_count` segments (events with one `routing_key` go to one segment, in order), with "
        "an optional retention policy and compaction settings; what it leaves out comes from its scope's "
        "defaults. 409 if the name is taken.",
    ),
    "streams_retrieve": (
        "Streams",
        "One stream",
        "Its `head_cut` and `tail_cut` (per segment, the first offset held and the next offset to be written), "
        "payload `size_bytes`, `event_count`, retention policy and settings; `inherited_from_scope` lists the "
        "settings its scope decides.",
    ),
    "streams_partial_update": (
        "Streams",
        "Change a stream's settings",
        "Any of description, `cleanup_policy`, `on_max_limit`, delayed-delivery and compaction settings. "
        "Setting one that came from the scope makes it the stream's own.",
    ),
    "streams_destroy": (
        "Streams",
        "Delete a stream",
        "Admins only. Deletes its events, index and history; reader groups reading it keep running on their "
        "other streams and list it under `removed_streams`.",
    ),
    "streams_retention_policy_retrieve": (
        "Retention",
        "A stream's retention policy",
        "`limit_type` (time, size or none), `min`, `max`, `consumption_based` with `subscriber_timeout_s` and "
        "`fallback_after_s`. 404 when the stream has none.",
    ),
    "streams_retention_policy_update": (
        "Retention",
        "Set a stream's retention policy",
        "Replaces the policy. With `consumption_based`, data is released only once every active subscriber has "
        "acknowledged it, between the `min` (always kept) and `max` (never exceeded) limits.",
    ),
    "streams_retention_set_list": (
        "Retention",
        "A stream's retention set",
        "The recorded (time, size, cut) points retention decides from, oldest first: one per cycle at most "
        "every `CBR_RETENTION_INTERVAL`.",
    ),
    "streams_truncate_create": (
        "Retention",
        "Truncate a stream now",
        "Admins only. Deletes everything before `stream_cut`, whatever the policy and the subscribers say, and "
        "records it in the history as `manual`. 409 while a retention cycle works on the stream.",
    ),
    "streams_truncations_list": (
        "Retention",
        "A stream's truncation history",
        "Each truncation: when, the cut, the rule that decided it (e.g. `cbr:case-iii:limit_max`), the "
        "subscribers weighed, and the bytes and events reclaimed. Newest first, paginated.",
    ),
    "streams_purge_create": (
        "Retention",
        "Purge a stream's events",
        'Admins only. `{"to": "tail"}` deletes every event held, `{"to": {"time": …}}` what was published '
        "before that time: a manual truncation at that cut, recorded in the history as `manual`.",
    ),
    "streams_republish_create": (
        "Events",
        "Republish dead letters",
        "Operators, on a dead-letter stream (`<name>-dlq`). Appends the dead letters chosen (or `all`) to the "
        "streams they came from, as they came and without their `cbr-` headers, each once: one republished "
        "before is skipped. Answers how many went back and how many were skipped.",
    ),
    "streams_seal_create": (
        "Streams",
        "Seal the active chunks now",
        "Operators. Rolls every segment's active chunk, so that retention and compaction can act on its events "
        "without waiting for `CBR_CHUNK_BYTES` or `CBR_CHUNK_SECONDS`.",
    ),
    "streams_offload_create": (
        "Streams",
        "Copy what a stream has sealed to long-term storage now",
        "Operators. Queues the copy of every sealed chunk (and columnar copy) not in long-term storage yet, "
        "whatever its age, and answers how many files and bytes that is (202). Each copy is verified by reading "
        "it back. 409 `no_tier` when the deployment has no long-term storage (`CBR_TIER_URL`).",
    ),
    "streams_scale_create": (
        "Streams",
        "Scale a stream: split or merge segments",
        'Operators. `{"seal": [ids], "new_ranges": [[lo, hi], …], "epoch"?: n}` seals those active segments and '
        "makes successors over exactly their keys (a split, a merge, or both), as one step: the next epoch. "
        "Publishing routes by the new segments at once; nothing is moved or copied; readers pass to a successor "
        "once they have read every one of its predecessors to its end. A stale `epoch` is a 409 `epoch_mismatch`.",
    ),
    "streams_scaling_policy_update": (
        "Streams",
        "Set how a stream scales by itself",
        'Operators. `{"type": "fixed"|"by_event_rate"|"by_byte_rate", "target_rate"?, "scale_factor"?: 2, '
        '"min_segments"?: 1}`: evaluated every minute from each active segment\'s 2-, 5-, 10- and 20-minute rates '
        "(a segment over the target splits, two cold neighbours merge, never below `min_segments`, ten minutes' "
        "cool-down for new segments). Answers the stream.",
    ),
    "streams_scalings_list": (
        "Streams",
        "A stream's scaling history",
        "Each scale, newest first: the epoch it made, the segments it sealed and made, its trigger (`manual` or "
        "`auto`) and, for an automatic one, the rule and the rates that decided it. Paginated.",
    ),
    # -- events ---------------------------------------------------------------------------------
    "streams_events_create": (
        "Events",
        "Publish events",
        "Appends the events and answers their positions, in the order given, once they are durable. `payload` "
        "is text, `payload_b64` bytes; `routing_key` picks the segment (same key, same segment, in order); "
        "`key` is the compaction key; `deliver_at` or `delay_ms` delays delivery to reader groups; `ttl_s` is "
        "the event's time to live. Up to "
        "`CBR_MAX_BATCH_EVENTS` events per request; a bad event refuses the whole batch, naming it "
        "(`events[3].payload_b64`).",
    ),
    "streams_events_raw_create": (
        "Events",
        "Publish a large event",
        "One event whose payload is the request's body (`Content-Type: application/octet-stream`, up to "
        "`CBR_MAX_LARGE_EVENT_BYTES`, 64 MiB by default), streamed to disk as it arrives and never held whole "
        "in memory; its `routing_key`, `key`, `deliver_at` or `delay_ms` and `ttl_s` in the query. Answers its "
        "position and `payload_url`. Reads carry `payload_url` and `payload_size` in place of its payload. A "
        "body cut off mid-way writes nothing (400 `body_cut_off`); one above the cap is refused before it is "
        "read (413).",
    ),
    "streams_events_payload_retrieve": (
        "Events",
        "An event's payload, as bytes",
        "The payload of the event at `segment`/`offset` (a large event's `payload_url`; any event's works), as "
        "`application/octet-stream`: whole, or the one range `Range: bytes=first-last` asks for (206 with "
        "`Content-Range`; 416 when it starts past the end). A compacted stream's value the live log no longer "
        "holds is served from its compacted view. A reader group's API key may read the streams its group reads.",
    ),
    "streams_events_retrieve": (
        "Events",
        "Browse or search events",
        'A plain read from the cut `from` (JSON, e.g. `{"0": 120}`; the head when left out) or from '
        "`from_time`: no delivery, no acknowledgement, retention not held. Pass the answer's `next_cut` as "
        "the next `from`. With `contains`, `header`, `json`, `routing_key` or `key` it is a search: each page "
        "examines at most `CBR_SEARCH_SCAN_EVENTS` events (`examined`).",
    ),
    "streams_events_export_retrieve": (
        "Events",
        "Export events",
        "The events from the cut `from` (the head when left out) up to `to` (not included; the tail), filtered "
        "as a search is, streamed as JSON lines (`format=jsonl`) or CSV (`format=csv`): an export of any size.",
    ),
    # -- compaction -----------------------------------------------------------------------------
    "streams_compacted_retrieve": (
        "Compaction",
        "Read the compacted view",
        "The latest event of each key (tombstones past `delete_retention_s` dropped), from the view's current "
        "generation. 409 if the stream is not compacted.",
    ),
    "streams_compactions_list": (
        "Compaction",
        "A stream's compaction runs",
        "The last runs, newest first: state, trigger, generation, events in and out, keys, bytes, missed events, duration.",
    ),
    "streams_compactions_create": (
        "Compaction",
        "Compact now",
        "Queues a compaction run of the stream (a Spark job). 409 if one is running already or the stream is "
        "not compacted.",
    ),
    # -- scopes ---------------------------------------------------------------------------------
    "scopes_defaults_retrieve": (
        "Scopes",
        "A scope's defaults",
        "The retention policy and compaction settings the scope's streams take when they set none of their own.",
    ),
    "scopes_defaults_update": (
        "Scopes",
        "Set a scope's defaults",
        "Replaces the scope's defaults whole, and carries them to every stream of the scope that inherits them, "
        "in one transaction. A stream that sets a value itself keeps its own.",
    ),
    "scopes_defaults_destroy": (
        "Scopes",
        "Remove a scope's defaults",
        "Streams keep the values they had, now as their own.",
    ),
    # -- reader groups --------------------------------------------------------------------------
    "reader_groups_list": (
        "Reader groups",
        "List reader groups",
        "Paginated, each with its streams and its subscriptions' acknowledgement cuts.",
    ),
    "reader_groups_create": (
        "Reader groups",
        "Create a reader group",
        "A group consuming `streams`. `retention_type` other than `NONE` makes it a **subscriber**: retention "
        "keeps what it has not acknowledged. `start` (head, tail, a time, stream cuts) says where it begins; "
        "`end_stream_cuts` bounds it. Leases last `ack_timeout_s`; after `max_deliveries` an event is poison "
        "(`on_poison`); `backoff_s` spaces redeliveries; `ack_policy: none` is at-most-once.",
    ),
    "reader_groups_retrieve": (
        "Reader groups",
        "One reader group",
        "Its settings and `generation`; per stream the acknowledgement cut and whether the subscriber is "
        "active; per segment `positions`: `floor` (lowest offset not acknowledged), head, tail, `lag_events`, "
        "pending, redelivered, dead-lettered; the latest checkpoints; `finished` for a bounded group.",
    ),
    "reader_groups_partial_update": (
        "Reader groups",
        "Change a reader group",
        "Any create field but scope, name and start. Moves `generation` on by one; pass the `generation` you "
        "read to refuse (409) a change made meanwhile by someone else.",
    ),
    "reader_groups_destroy": (
        "Reader groups",
        "Delete a reader group",
        "Operators. Releases its hold on retention; its leases and positions are dropped.",
    ),
    "reader_groups_seek_create": (
        "Reader groups",
        "Seek: move a reader group",
        "Operators. Moves every consumer of the group to the head, the tail, the first events at or after a "
        "time, or given stream cuts. Live leases are dropped (deliveries in hand can no longer be "
        "acknowledged), the floor and a subscriber's acknowledgement cut move to the target, backwards too, "
        "and `generation` moves on by one.",
    ),
    "reader_groups_truncation_cut_create": (
        "Reader groups",
        "Publish an acknowledgement cut",
        "A `MANUAL_RELEASE_AT_USER_STREAMCUT` subscriber says how far it has processed a stream: retention may "
        "release what lies before the cut. With `stream_cuts`, several streams at once: every cut is checked "
        "first, then all are applied or none.",
    ),
    "reader_groups_read_create": (
        "Consuming",
        "Read: take deliveries",
        "Hands out up to `max_events` events not yet acknowledged, each as a delivery with a `delivery_id` and a "
        "lease of `ack_timeout_s`; an expired lease's event is handed out again. `wait_ms` long-polls when "
        "nothing is ready. `consumer` names the caller (the console shows it). `ack` acknowledges the previous "
        "batch first, in the same request; `ranges: true` adds the deliveries as id ranges. With `Accept: "
        "application/vnd.cbr.read-batch` the same answer comes in binary (docs/consuming.md; errors stay JSON).",
    ),
    "reads_create": (
        "Consuming",
        "Many reads in one request",
        "Reads of many consumers (of one group or of many) in one request: each a read's body with the group it "
        "reads from (`reader_group`). Each is answered as its lone request would be, as soon as it has an answer, "
        'one line of JSON each (`application/x-ndjson`): `{"read": i, "status": s, "answer": ...}`. A read that '
        "waits costs the server what a lone waiting read does; all of them one connection (docs/consuming.md).",
    ),
    "reader_groups_ack_create": (
        "Consuming",
        "Acknowledge deliveries",
        "The deliveries are processed, in any order: the floor moves past every offset acknowledged with all "
        "before it. Idempotent. Ids not as the server writes them refuse the request before anything applies "
        "(400 `unknown_delivery`, naming `delivery_ids[i]`); a delivery whose lease was re-granted to someone "
        "else is refused one by one (409 `lease_lost`) while the others apply, the answer listing `refused` "
        "and what was `acked`.",
    ),
    "reader_groups_nack_create": (
        "Consuming",
        "Give deliveries back",
        "The events come again after `delay_ms` (or the group's `backoff_s`). After `max_deliveries` an event "
        "is poison: dead-lettered, skipped or halting the group (`on_poison`). 409 `ack_policy_none` for an "
        "at-most-once group.",
    ),
    "reader_groups_consumers_retrieve": (
        "Consuming",
        "List a group's consumers",
        "Each consumer heard from in the last day, by the name it reads under (`consumer`; `default` when it "
        "gives none), the most recently heard first: its last read and acknowledgement, whether a read of its "
        "waits now, events handed to it and acknowledged by it per second over the last minute (`read_rate`, "
        "`ack_rate`), the deliveries in its hands (`in_flight`: handed to it, neither acknowledged, given back "
        "nor expired) and its totals. The counts reach every web process within about a second.",
    ),
    "reader_groups_checkpoints_retrieve": (
        "Consuming",
        "List checkpoints",
        "The group's last 100 checkpoints, newest first, each with its cuts.",
    ),
    "reader_groups_checkpoints_create": (
        "Consuming",
        "Checkpoint now",
        "Records the group's floors under `name`. An `AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT` subscriber "
        "publishes them as its acknowledgement cuts. `persist` keeps it until deleted or wholly before the "
        "streams' heads.",
    ),
    "reader_groups_checkpoint_retrieve": (
        "Consuming",
        "One checkpoint",
        "Its cuts, whether it persists, and when it was made.",
    ),
    "reader_groups_checkpoints_destroy": (
        "Consuming",
        "Delete a checkpoint",
        "The checkpoint is gone (404 `checkpoint_not_found` after); a cut already released at it stays.",
    ),
    "reader_groups_checkpoints_release_create": (
        "Consuming",
        "Release at a checkpoint",
        "Publishes the checkpoint's cuts as the group's acknowledgement cuts (offsets the head has passed count "
        "as at the head).",
    ),
    # -- retention cycles -----------------------------------------------------------------------
    "retention_cycles_list": (
        "Retention",
        "List retention cycles",
        "Newest first: state, trigger, progress, streams truncated, bytes reclaimed, errors.",
    ),
    "retention_cycles_create": (
        "Retention",
        "Run a retention cycle",
        "Operators. Queues a cycle of every stream with a policy, or of `stream`; follow it with its id. Admins "
        "may give `now`, the clock the cycle decides at.",
    ),
    "retention_cycles_retrieve": (
        "Retention",
        "One retention cycle",
        "Its state and progress (streams done of total), truncations, bytes reclaimed, engine and error.",
    ),
}

_CUT = {"0": 120, "1": 97, "2": 0, "3": 0}  # a cut names every segment of the stream (4 in the examples)

# operation id -> examples of its request body (Swagger shows them; the fuzzer sends them too).
EXAMPLES: dict[str, dict[str, dict]] = {
    "streams_create": {
        "consumption_based": {
            "summary": "Consumption-based retention between 1 MB and 50 MB",
            "value": {
                "scope": "shop",
                "name": "orders",
                "segment_count": 4,
                "retention_policy": {"limit_type": "size", "min": 1000000, "max": 50000000, "consumption_based": True},
            },
        },
        "compacted": {
            "summary": "A compacted stream (the latest event of each key)",
            "value": {"scope": "shop", "name": "prices", "segment_count": 2, "cleanup_policy": "compact"},
        },
    },
    "streams_events_create": {
        "text": {
            "summary": "Text events, ordered by customer",
            "value": {
                "events": [
                    {"payload": "order 1 created", "routing_key": "customer-7", "key": "order-1"},
                    {
                        "payload": "order 1 paid",
                        "routing_key": "customer-7",
                        "key": "order-1",
                        "headers": {"type": "paid"},
                    },
                ]
            },
        },
        "bytes_and_delay": {
            "summary": "Bytes, delivered in a minute",
            "value": {"events": [{"payload_b64": "3q2+7w==", "delay_ms": 60000}]},
        },
    },
    "streams_retention_policy_update": {
        "time": {
            "summary": "Keep a day at least, a week at most, release what subscribers processed",
            "value": {
                "limit_type": "time",
                "min": 86400,
                "max": 604800,
                "consumption_based": True,
                "subscriber_timeout_s": 3600,
            },
        }
    },
    "reader_groups_create": {
        "subscriber": {
            "summary": "A subscriber that checkpoints itself",
            "value": {
                "scope": "shop",
                "name": "billing",
                "streams": ["shop/orders"],
                "retention_type": "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT",
                "start": "head",
                "ack_timeout_s": 30,
                "max_deliveries": 5,
                "backoff_s": [1, 5, 30],
            },
        }
    },
    "reader_groups_read_create": {
        "long_poll": {
            "summary": "Up to 100 events, waiting up to 5 s",
            "value": {"max_events": 100, "wait_ms": 5000, "consumer": "billing-1"},
        }
    },
    "reader_groups_ack_create": {
        "ack": {"summary": "Acknowledge two deliveries", "value": {"delivery_ids": ["1-7-0-120-1", "1-7-1-97-1"]}}
    },
    "reader_groups_nack_create": {
        "retry_later": {
            "summary": "Give one back, to come again in 10 s",
            "value": {"delivery_ids": ["1-7-0-121-1"], "delay_ms": 10000, "reason": "database busy"},
        }
    },
    "reader_groups_truncation_cut_create": {
        "one_stream": {"summary": "One stream's cut", "value": {"stream": "shop/orders", "stream_cut": _CUT}},
        "several": {
            "summary": "Several streams at once (all or none)",
            "value": {"stream_cuts": {"shop/orders": _CUT, "shop/returns": {"0": 12}}, "generation": 3},
        },
    },
    "reader_groups_seek_create": {
        "head": {"summary": "Back to the oldest event held", "value": {"position": "head"}},
        "time": {"summary": "To what was published from a time on", "value": {"time": "2026-11-21T22:00:00Z"}},
        "cuts": {"summary": "To given cuts", "value": {"stream_cuts": {"shop/orders": _CUT}}},
    },
    "reader_groups_checkpoints_create": {
        "nightly": {"summary": "A checkpoint kept until deleted", "value": {"name": "nightly", "persist": True}}
    },
}

TAGS = [
    {"name": "Streams", "description": "Streams and their segments, settings and sealing."},
    {"name": "Events", "description": "Publishing and browsing events."},
    {"name": "Reader groups", "description": "Groups of consumers: create, change, seek, acknowledgement cuts."},
    {
        "name": "Consuming",
        "description": "Read, acknowledge, give back, checkpoint: at least once (docs/consuming.md).",
    },
    {"name": "Retention", "description": "Policies, cycles, truncations and their history (docs/retention.md)."},
    {"name": "Compaction", "description": "Compacted streams: the view and its runs (docs/compaction.md)."},
    {"name": "Scopes", "description": "Defaults a scope gives its streams."},
    {"name": "Access", "description": "Tokens and scoped API keys (docs/security.md)."},
]


def describe_operations(result, generator, request, public):
    """Every operation's tag, summary and description, and the examples of the bodies that matter."""
    for item in result.get("paths", {}).values():
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            entry = OPERATIONS.get(operation["operationId"])
            if entry is None:
                continue  # tests/api/test_schema_descriptions.py names it
            operation["tags"], operation["summary"], operation["description"] = [entry[0]], entry[1], entry[2]
            examples = EXAMPLES.get(operation["operationId"])
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if examples and body is not None:
                body["examples"] = examples
    result["tags"] = TAGS
    return result
