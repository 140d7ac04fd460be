"""Reader groups (docs/design/acks.md): groups and their subscriptions, acknowledgement cuts,
reading, acking, checkpoints and dead letters, the Redis tracker of each subscription, the
release of due delayed events to the groups, and what the console, the API and /metrics show of
them. It stands on `streams` (the log, publishing, delayed delivery's index) and never the other
way: the stream layer tells it what it must know by signals and registered callbacks
(docs/architecture.md)."""
