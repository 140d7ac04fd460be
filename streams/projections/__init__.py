"""Read-only projections of streams and reader groups, for the console, the API and /metrics:
what a group's positions, lag and cuts are (`lag`, `overview`), and what a stream's delayed
index holds (`delayed`). Nothing here changes state; the rules and writes live in
`streams.consuming`, `streams.delaying` and `streams.acknowledgement`."""
