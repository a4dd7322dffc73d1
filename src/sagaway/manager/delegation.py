"""Manager methods that are a collaborator's: declared once, on the collaborator.

``fork = Delegated("_operators", OperatorCalls.fork)`` in the Manager's class makes
``manager.fork(...)`` the bound method of the Manager's ``_operators`` part, with its
signature and docstring, typed for mypy; ``Manager.fork`` (on the class) is the collaborator's
function, so ``help()`` and ``inspect.signature`` show the real parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")


class Delegated(Generic[P, R]):
    """A method of the owner that calls the same-named method of its part ``part``."""

    def __init__(self, part: str, fn: Callable[Concatenate[Any, P], R]) -> None:
        self._part = part
        self._fn = fn
        self._name = ""
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type[Any], name: str) -> None:
        # A typo here would call another method than the one named: refuse it at import.
        if getattr(self._fn, "__name__", None) != name:
            raise TypeError(f"{owner.__name__}.{name} delegates to a method of another name")
        self._name = name

    @overload
    def __get__(
        self, obj: None, owner: type[Any] | None = None
    ) -> Callable[Concatenate[Any, P], R]: ...

    @overload
    def __get__(self, obj: object, owner: type[Any] | None = None) -> Callable[P, R]: ...

    def __get__(
        self, obj: object | None, owner: type[Any] | None = None
    ) -> Callable[Concatenate[Any, P], R] | Callable[P, R]:
        if obj is None:
            return self._fn
        method: Callable[P, R] = getattr(getattr(obj, self._part), self._name)
        return method
