"""The admin `make run` makes on a database without one, and where its password stays.

Its password is random, shown in the start-up banner and kept in a file only its owner can read
(`CBR_ADMIN_PASSWORD_FILE`, `var/admin-password`), so that a user whose terminal scrolled the
banner away finds it again: every start names the file. Once the admin's password is changed
(the console's "Change password", `manage.py changepassword admin`) the file is removed: the next
start, or the console's change itself, sees that it no longer signs in, and says so."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model

USERNAME = "admin"


@dataclass(frozen=True)
class AdminStatus:
    """What a start says about the admin: `created` with `password` (shown once, and kept in
    `path`); `kept` (the file still holds the admin's password); `removed` (it did not any more);
    or none of them (an admin made otherwise, no file)."""

    path: Path
    created: bool = False
    password: str = ""
    kept: bool = False
    removed: bool = False


def ensure_admin(path: Path) -> AdminStatus:
    """Make the admin if no superuser exists, its password kept in `path`; otherwise check that
    a kept password still signs the admin in, removing the file when it does not."""
    users = get_user_model()
    if not users.objects.filter(is_superuser=True).exists():
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(USERNAME, "admin@localhost", password)
        _keep(path, password)
        return AdminStatus(path, created=True, password=password)
    if not path.exists():
        return AdminStatus(path)
    if kept_password_signs_in(path):
        return AdminStatus(path, kept=True)
    path.unlink(missing_ok=True)
    return AdminStatus(path, removed=True)


def kept_password_signs_in(path: Path) -> bool:
    try:
        kept = path.read_text().strip()
    except OSError:
        return False
    admin = get_user_model().objects.filter(username=USERNAME).first()
    return admin is not None and bool(kept) and admin.check_password(kept)


def forget_if_changed(path: Path) -> bool:
    """After a password change: remove the file if it no longer holds the admin's password.
    Returns whether it was removed."""
    if path.exists() and not kept_password_signs_in(path):
        path.unlink(missing_ok=True)
        return True
    return False


def _keep(path: Path, password: str) -> None:
    """Written whole, readable and writable by its owner only from the start (never a moment
    with wider rights), replacing a file an earlier database left behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password + "\n")
