"""The console's own account page: a signed-in person changes their password (Django's form and
rules: the old password, the new one twice, the validators of `AUTH_PASSWORD_VALIDATORS`). The
admin `make run` made gets its kept password file removed by the change (`access.first_admin`)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.forms import PasswordChangeForm
from django.shortcuts import redirect, render

from access.first_admin import USERNAME, forget_if_changed
from access.permissions import console_access
from access.rules import Action


@console_access({"GET": Action.VIEW, "POST": Action.VIEW})
def change_password(request):
    form = PasswordChangeForm(request.user, request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        update_session_auth_hash(request, user)  # this session stays signed in
        note = "Your password was changed."
        path = settings.CBR_ADMIN_PASSWORD_FILE
        if user.get_username() == USERNAME and forget_if_changed(path):
            note += f" {path}, which held the old one, was removed."
        messages.success(request, note)
        return redirect("console:dashboard")
    kept = settings.CBR_ADMIN_PASSWORD_FILE if request.user.get_username() == USERNAME else None
    return render(
        request,
        "console/account/password.html",
        {"form": form, "kept_file": kept if kept is not None and kept.exists() else None},
    )
