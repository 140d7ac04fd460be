"""`make run`'s first admin (`access.first_admin`, `manage.py first_admin`): its password shown
once in the banner and kept in a file only its owner can read, named on every start, removed once
the password is changed."""

import io
import stat

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from access.first_admin import ensure_admin, forget_if_changed

pytestmark = pytest.mark.django_db


def run(settings, path) -> str:
    settings.CBR_ADMIN_PASSWORD_FILE = path
    out = io.StringIO()
    call_command("first_admin", stdout=out)
    return out.getvalue()


def test_the_first_start_makes_the_admin_and_keeps_its_password_for_its_owner_only(settings, tmp_path):
    path = tmp_path / "var" / "admin-password"

    banner = run(settings, path)

    password = path.read_text().strip()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(password)
    assert password in banner and str(path) in banner and "changepassword admin" in banner


def test_every_later_start_names_the_file_until_the_password_is_changed(settings, tmp_path):
    path = tmp_path / "admin-password"
    run(settings, path)

    again = run(settings, path)
    assert str(path) in again and path.read_text().strip() not in again  # named, not shown again
    assert get_user_model().objects.filter(is_superuser=True).count() == 1

    admin = get_user_model().objects.get(username="admin")
    admin.set_password("a new one of my own")
    admin.save()
    changed = run(settings, path)
    assert "was changed" in changed and not path.exists()
    assert run(settings, path) == ""  # nothing more to say


def test_a_database_with_an_admin_of_its_own_gets_no_second_one_and_no_file(tmp_path):
    get_user_model().objects.create_superuser("root", "r@localhost", "secret")
    status = ensure_admin(tmp_path / "admin-password")
    assert not status.created and not (tmp_path / "admin-password").exists()
    assert not get_user_model().objects.filter(username="admin").exists()


def test_a_file_an_earlier_database_left_is_replaced_not_trusted(tmp_path):
    path = tmp_path / "admin-password"
    path.write_text("old database's\n")
    path.chmod(0o644)
    status = ensure_admin(path)
    assert status.created and path.read_text().strip() == status.password
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_change_removes_the_file_at_once(tmp_path):
    path = tmp_path / "admin-password"
    ensure_admin(path)
    assert not forget_if_changed(path) and path.exists()  # still its password: kept
    admin = get_user_model().objects.get(username="admin")
    admin.set_password("changed")
    admin.save()
    assert forget_if_changed(path) and not path.exists()
