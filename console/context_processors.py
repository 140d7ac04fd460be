"""Every console page knows the signed-in person's role (the header shows it; pages hide what
the role may not do, and the server refuses it anyway)."""

from access.principals import role_of
from access.rules import ROLE_ACTIONS


def access(request):
    """`cbr_role`, and `cbr_may`: the names of the actions the role allows (`"manage streams" in
    cbr_may`), for showing only the buttons that will work."""
    role = role_of(getattr(request, "user", None))
    return {"cbr_role": role, "cbr_may": {a.value for a in ROLE_ACTIONS.get(role, ())} if role else set()}
