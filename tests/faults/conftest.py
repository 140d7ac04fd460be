"""Fault injection: the real web server, worker and Redis of tests/integration, broken on
purpose. The fixtures are those of tests/integration/conftest.py, shared rather than copied."""

from __future__ import annotations

import factories
import pytest
from integration.conftest import WebServer, _database_url, _free_port, celery_worker, web_server  # noqa: F401


@pytest.fixture
def token(django_user_model):
    """An admin's API token (manual truncation is for admins)."""
    return factories.token_for(factories.make_user("faults", "admin", password="pw-faults-1"))


@pytest.fixture
def small_chunks(monkeypatch, settings):
    """Chunks of 8 KiB in the server and here, so that faults meet rolls and truncations delete
    whole chunks. Ask for it before `web_server`."""
    monkeypatch.setenv("CBR_CHUNK_BYTES", "8192")
    settings.CBR_CHUNK_BYTES = 8192
