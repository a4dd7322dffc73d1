"""Verbs of the store contract written once, their signature the contract's (for the type
checker and ``help``), never spelt out again:

- ``forward(Store.verb, "attr")`` calls the namesake of the object held in an attribute. Used
  by the SQL stores (their collaborators) and by the codec store (the inner store, for the
  verbs that carry no payload).
- ``derived(Store.verb, body)`` answers with ``body(self, values)``, the call's arguments by
  name with the defaults filled in: for a store that only reshapes a verb's arguments on their
  way down (the SQL stores turn them into their statement's parameters, the codec store seals
  the payloads among them). A parameter added to the contract then reaches such a store
  without one more signature to keep in step.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])
Body = Callable[[Any, dict[str, Any]], Awaitable[Any]]


def forward(verb: F, to: str) -> F:
    """A method calling ``verb``'s namesake on the object held in attribute ``to``."""
    name = verb.__name__

    @functools.wraps(verb)
    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await getattr(getattr(self, to), name)(*args, **kwargs)

    return method  # type: ignore[return-value]  # F: the signature of the contract's verb


def derived(method: F, body: Body) -> F:
    """The contract's verb ``method``, answered by ``body(self, arguments by name)``."""
    signature = inspect.signature(method)
    names = tuple(signature.parameters)[1:]  # past ``self``
    expected = frozenset(names)
    defaults = {
        name: p.default
        for name, p in signature.parameters.items()
        if p.default is not inspect.Parameter.empty
    }

    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        values = {**defaults, **dict(zip(names, args, strict=False)), **kwargs}
        if len(args) > len(names) or values.keys() != expected:
            wrong = sorted(expected.symmetric_difference(values))
            raise TypeError(f"{method.__name__}() arguments missing or unknown: {wrong}")
        return await body(self, values)

    call.__name__ = call.__qualname__ = method.__name__
    call.__doc__ = method.__doc__
    call.__signature__ = signature  # type: ignore[attr-defined]
    return cast(F, call)
