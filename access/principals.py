"""Who is asking, from a request: a signed-in person's role (role groups, staff and superusers
are admins) or the scope of the API key a program sent. Roles are Django groups named after
them, so the Django admin assigns them; a user in no role group is a viewer."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser

from access.rules import Principal, Role, strongest

ROLE_GROUPS = tuple(r.value for r in Role)


class KeyHolder(AnonymousUser):
    """request.user for a request made with an API key: authenticated, but nobody, so that no
    check of a person's flags (is_staff, groups) can ever grant a key more than its scope."""

    def __init__(self, api_key):
        self.api_key = api_key
        self.username = f"key:{api_key.prefix}"

    @property
    def is_authenticated(self):
        return True

    @property
    def is_anonymous(self):
        return False

    def __str__(self):
        return self.username


def role_of(user) -> Role | None:
    if user is None or not user.is_authenticated or isinstance(user, KeyHolder):
        return None
    cached = getattr(user, "_cbr_role", None)
    if cached is None:
        if user.is_superuser or user.is_staff:
            cached = Role.ADMIN
        else:
            names = set(user.groups.filter(name__in=ROLE_GROUPS).values_list("name", flat=True))
            cached = strongest(Role(n) for n in names) or Role.VIEWER
        user._cbr_role = cached
    return cached


def principal_of(request) -> Principal:
    user = getattr(request, "user", None)
    if isinstance(user, KeyHolder):
        return Principal(key=user.api_key.scope())
    return Principal(role=role_of(user))
