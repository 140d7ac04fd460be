"""`/healthz` and `/readyz` (docs/api.md): for load balancers and Kubernetes, without
authentication, answering nothing secret."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.cache import never_cache

from ops.health import readiness


@never_cache
def healthz(request):
    """Liveness: the process answers. It reads nothing, so a database or Redis outage never gets
    a healthy web process restarted."""
    return JsonResponse({"status": "alive"})


@never_cache
def readyz(request):
    """Readiness: 200 when the service can do its work, 503 naming what is down."""
    answer = readiness()
    return JsonResponse(answer, status=200 if answer["ready"] else 503)
