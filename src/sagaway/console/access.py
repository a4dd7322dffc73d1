"""What the console's principal may do: see pages (``read``), act (``ACTION_ROLES``).

The logged-in principal is ``request.state.principal`` (set by ``security.Guard`` for every
request, and the current one, ``principals.current_principal()``, while the request is
handled). Pages need ``read``; each action needs the role in ``ACTION_ROLES``. A button the
principal may not use is not shown, and its request is refused (403) whatever the page showed:
the check is here, on the server, for the confirmation page and the POST alike.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.requests import Request

from sagaway.principals import Principal, Role

PAGE_ROLE = Role.READ
"""Every page, fragment and ``/metrics``."""
ACTION_ROLES: Mapping[str, Role] = {
    "retry": Role.OPERATE,
    "cancel": Role.OPERATE,
    "signal": Role.OPERATE,
    "update": Role.OPERATE,
    "pause": Role.OPERATE,
    "resume": Role.OPERATE,
    "terminate": Role.ADMIN,
}
"""The role each operator action needs (an action missing here is refused to everyone)."""


def principal_of(request: Request) -> Principal | None:
    """The request's principal (None: not logged in)."""
    found = getattr(request.state, "principal", None)
    return found if isinstance(found, Principal) else None


def refusal(request: Request, action: str) -> str | None:
    """Why this request's principal may not perform ``action`` (None: it may)."""
    if request.app.state.config.read_only:
        return "this console is read-only (started with --read-only)"
    principal = principal_of(request)
    needed = ACTION_ROLES.get(action)
    if principal is None:
        return "not logged in"
    if needed is None:
        return f"no action {action!r} is allowed"
    if not principal.may(needed):
        held = ", ".join(r.value for r in Role if r in principal.roles) or "none"
        return (
            f"{principal.name!r} (roles: {held}) may not {action}: it needs the role {needed.value}"
        )
    return None


def allows(request: Request, action: str) -> bool:
    """Whether to show ``action``'s button to this request's principal."""
    return refusal(request, action) is None


def require(request: Request, action: str) -> None:
    """Refuse (403, with the reason) an action this request's principal may not perform."""
    why = refusal(request, action)
    if why is not None:
        raise HTTPException(403, f"refused: {why}")
