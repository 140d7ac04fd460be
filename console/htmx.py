"""When a console view answers with a fragment instead of a whole page: the one rule every console
view asks, once, at its end. It reads only `request.htmx` (django_htmx's
middleware); it must never render, redirect, or know about streams, groups or any other resource."""

from __future__ import annotations


def htmx_partial(request) -> bool:
    """Send a fragment only to htmx requests that are not boosted page loads (NetBox)."""
    return bool(request.htmx) and not request.htmx.boosted
