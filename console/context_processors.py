"""Every console page knows the signed-in person's role (the header shows it; pages hide what
the role may not do, and the server refuses it anyway)."""

from access.principals import role_of


def access(request):
    return {"cbr_role": role_of(getattr(request, "user", None))}
