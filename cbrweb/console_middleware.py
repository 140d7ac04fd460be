"""The middleware only the console's pages need (sessions, the signed-in user, messages, htmx),
left out of an API call that carries its own credentials (`Authorization: Token …` or
`Api-Key …`): together ~0.06 ms of CPU of every such call, a tenth of a one-event publish's.

Such a call never reaches the session: DRF tries the token, then the key, and each either
authenticates it or refuses it (401) before `SessionAuthentication` would look; DRF then sets
the user on the request itself. No API view reads a session, a message or `request.htmx`.
CSRF stays for every request (its check is in `process_view`, outside this choice); an API call
without such a header (a signed-in browser's) goes through all of them as before."""

from __future__ import annotations

from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django_htmx import middleware as htmx

API_PREFIX = "/api/"
_KEYWORDS = (b"token", b"api-key")  # access.token_cache's and access.authentication's


def carries_api_credentials(request) -> bool:
    """An API call whose `Authorization` header names a token or an API key."""
    if not request.path_info.startswith(API_PREFIX):
        return False
    header = request.META.get("HTTP_AUTHORIZATION", "").encode("latin-1").split(None, 1)
    return bool(header) and header[0].lower() in _KEYWORDS


class _ForConsole:
    """Runs the middleware it is mixed into, unless the request `carries_api_credentials`."""

    def __call__(self, request):
        if carries_api_credentials(request):
            return self.get_response(request)
        return super().__call__(request)


class SessionMiddleware(_ForConsole, sessions.SessionMiddleware):
    pass


class AuthenticationMiddleware(_ForConsole, auth.AuthenticationMiddleware):
    pass


class MessageMiddleware(_ForConsole, messages.MessageMiddleware):
    pass


class HtmxMiddleware(_ForConsole, htmx.HtmxMiddleware):
    pass
