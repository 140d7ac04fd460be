"""`manage.py first_admin`: what `make run` does for its admin on every start
(`access.first_admin`), said in a few lines."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from access.first_admin import USERNAME, ensure_admin


class Command(BaseCommand):
    help = (
        "Make the admin (a random password, kept in CBR_ADMIN_PASSWORD_FILE) if no superuser exists; "
        "otherwise name the file while it still holds the admin's password, and remove it once changed."
    )

    def handle(self, *args, **options) -> None:
        status = ensure_admin(settings.CBR_ADMIN_PASSWORD_FILE)
        path = status.path
        if status.created:
            bar = "=" * 72
            self.stdout.write(
                f"\n{bar}\n  Admin created. Sign in as  {USERNAME}  /  {status.password}\n"
                f"  The password is kept in {path} (readable by you only)\n"
                f"  until you change it: console > Change password, or manage.py changepassword {USERNAME}.\n"
                f"{bar}\n"
            )
        elif status.kept:
            self.stdout.write(f"cbr: sign in as {USERNAME} with the password kept in {path} (until you change it)")
        elif status.removed:
            self.stdout.write(f"cbr: the {USERNAME} password was changed: {path} removed")
