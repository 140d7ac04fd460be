"""The console's "Change password" page: every signed-in person changes their own password there
(Django's form and validators); a refusal names the field and changes nothing; the change keeps
the session and removes the password file `make run` kept for its admin."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from access.first_admin import ensure_admin
from tests import factories
from tests.page_text import text

pytestmark = pytest.mark.django_db


def test_every_page_links_to_it_and_a_viewer_may_use_it(client, plain_user):
    factories.console_client(plain_user, client)
    page = client.get("/streams/").content.decode()
    assert 'href="/account/password/"' in page
    form = client.get("/account/password/")
    assert form.status_code == 200
    assert all(f'name="{name}"' in form.content.decode() for name in ("old_password", "new_password1", "new_password2"))


def test_a_wrong_old_password_is_said_beside_it_and_changes_nothing(client, plain_user):
    factories.console_client(plain_user, client)
    answer = client.post(
        "/account/password/",
        {"old_password": "not it", "new_password1": "a-long-new-one-42", "new_password2": "a-long-new-one-42"},
    )
    assert answer.status_code == 200
    assert "Your old password was entered incorrectly" in text(answer.content.decode())
    plain_user.refresh_from_db()
    assert plain_user.check_password("pw-bob-123")


def test_the_change_keeps_the_session_and_the_new_password_signs_in(client, plain_user):
    factories.console_client(plain_user, client)
    answer = client.post(
        "/account/password/",
        {"old_password": "pw-bob-123", "new_password1": "a-long-new-one-42", "new_password2": "a-long-new-one-42"},
        follow=True,
    )
    assert answer.redirect_chain[-1][0] == "/" and "Your password was changed." in text(answer.content.decode())
    assert client.get("/streams/").status_code == 200  # still signed in
    assert Client().login(username="bob", password="a-long-new-one-42")


def test_the_admin_make_run_made_has_its_kept_password_file_removed_by_the_change(client, settings, tmp_path):
    path = tmp_path / "admin-password"
    settings.CBR_ADMIN_PASSWORD_FILE = path
    status = ensure_admin(path)
    factories.console_client(get_user_model().objects.get(username="admin"), client)
    assert str(path) in text(client.get("/account/password/").content.decode())  # said where it is kept

    answer = client.post(
        "/account/password/",
        {"old_password": status.password, "new_password1": "my-own-one-2026", "new_password2": "my-own-one-2026"},
        follow=True,
    )
    assert not path.exists()
    assert f"{path}, which held the old one, was removed." in text(answer.content.decode())
