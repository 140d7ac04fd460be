"""The fuzz test runs against the real web server of the integration tests."""

from tests.integration.conftest import web_server  # noqa: F401  (the fixture, reused)
