"""Forwarding a verb of the store contract to another object, written once: the forwarded
method has the contract's signature (for the type checker and ``help``) and calls the namesake
of the object held in an attribute. Used by the SQL stores (their collaborators) and by the
codec store (the inner store, for the verbs that carry no payload)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def forward(verb: F, to: str) -> F:
    """A method calling ``verb``'s namesake on the object held in attribute ``to``."""
    name = verb.__name__

    @functools.wraps(verb)
    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await getattr(getattr(self, to), name)(*args, **kwargs)

    return method  # type: ignore[return-value]  # F: the signature of the contract's verb
