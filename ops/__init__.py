"""Operations: what keeps the service watched and steered, apart from the streams themselves.
Health and readiness (`health`: what `/readyz` and the console's health panel are decided from,
and the workers' and beat's heartbeats; `health_views`: `/healthz`, `/readyz`), the Prometheus
exposition (`metrics`, `exposition`: `/metrics`), and beat's schedules as operators change them
(`schedules`). A layer of its own between the edges (the API and the console, which call it)
and the apps (whose state it reads): it never imports the edges."""
