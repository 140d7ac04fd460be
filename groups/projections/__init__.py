"""Read-only projections of reader groups, for the console, the API and /metrics: a group's
positions and lag (`lag`), and each group as a whole (`overview`). Nothing here changes state;
the rules and writes live in `groups.consuming` and `groups.acknowledgement`."""
