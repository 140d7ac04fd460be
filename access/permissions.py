"""The one gate of the API and the console: each view declares the action each method needs and
what it is about; access.rules decides. An API view without a declared action is refused
(fail closed), so a new endpoint cannot open by accident."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponseNotAllowed
from django.shortcuts import render
from rest_framework.permissions import BasePermission

from access.principals import principal_of
from access.rules import Action, Target, TargetKind, decide


def target_from(kind: TargetKind | None, kwargs: dict) -> Target | None:
    if kind is None or "scope" not in kwargs or "name" not in kwargs:
        return None
    return Target(kind, f"{kwargs['scope']}/{kwargs['name']}")


def required_action(access: dict, method: str) -> Action | None:
    if method == "HEAD":
        method = "GET"
    if method == "OPTIONS":
        return Action.VIEW
    return access.get(method)


class CbrAccess(BasePermission):
    """DRF permission: a view sets `access = {"GET": Action.VIEW, ...}` and `access_target`
    (TargetKind.STREAM / READER_GROUP when its URL names one)."""

    message = "not allowed"

    def has_permission(self, request, view):
        access = getattr(view, "access", None)
        if access is None:
            self.message = "this endpoint declares no access rule"
            return False
        action = required_action(access, request.method)
        if action is None:
            return True  # a method the view does not have: DRF answers 405
        decision = decide(principal_of(request), action, target_from(getattr(view, "access_target", None), view.kwargs))
        self.message = decision.reason
        return decision.allowed


def can(request, action: Action, target: Target | None = None) -> bool:
    return decide(principal_of(request), action, target).allowed


def console_access(access: dict[str, Action], target: TargetKind | None = None):
    """Console pages: signed-in people only (keys are for the API), each method's action checked."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            action = required_action(access, request.method)
            if action is None:
                return HttpResponseNotAllowed(sorted(access))
            decision = decide(principal_of(request), action, target_from(target, kwargs))
            if not decision.allowed:
                # a page, with the navigation and why (the same status and reason as before)
                return render(request, "403.html", {"reason": decision.reason}, status=403)
            return view(request, *args, **kwargs)

        wrapped.access = access  # what the authorization matrix test reads
        return wrapped

    return decorator
