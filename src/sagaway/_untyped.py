"""Values a payload's annotation leaves untyped must be plain JSON data, or they are refused.

A payload is decoded by its annotation. Where the annotation says nothing of a value's type, the
decoder gives back the JSON it reads: a set or tuple would come back as a list, bytes, a
datetime, a Decimal or a UUID as a string, an Enum as its value, a dataclass or model as a dict,
an int dict key as a string. So such a value is refused when it is sent (``PayloadError`` naming
where it is and its type) rather than changed.

Untyped places (``plan``): a parameter or return annotated ``Any`` or ``object`` or not at all;
inside a typed annotation, the items of ``list``/``set``/``frozenset``/``tuple``/``Sequence``
and the keys and values of ``dict``/``Mapping`` whose item type is ``Any``/``object`` or not
given (``list``, ``dict[str, Any]``); the same inside ``X | None``, ``Annotated[X, ...]`` and
the fields of dataclasses and pydantic models. Plain JSON data: ``None``, ``bool``, ``int``,
``float``, ``str`` (exactly these types, not subclasses such as an ``Enum``), and lists and
dicts with ``str`` keys of plain JSON data. Other unions are not looked into.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

import pydantic

Check = Callable[[Any, str], Iterator[tuple[str, Any]]]
"""Yields (where, value) for each value in an untyped place that is not plain JSON data."""

_PLAIN = frozenset({str, int, float, bool, type(None)})
_SEQUENCES = frozenset(
    {
        list,
        set,
        frozenset,
        collections.abc.Sequence,
        collections.abc.MutableSequence,
        collections.abc.Set,
        collections.abc.MutableSet,
        collections.abc.Collection,
        collections.abc.Iterable,
    }
)
_MAPPINGS = frozenset({dict, collections.abc.Mapping, collections.abc.MutableMapping})


def _untyped(annotation: Any) -> bool:
    return annotation in (Any, object, inspect.Parameter.empty)


def plan(annotation: Any) -> Check | None:
    """How to find the values ``annotation`` leaves untyped (None: it leaves none)."""
    return _plan(annotation, {})


def _plan(annotation: Any, seen: dict[Any, Check | None]) -> Check | None:
    if _untyped(annotation):
        return _plain
    try:
        if annotation in seen:
            return seen[annotation]
    except TypeError:  # an unhashable annotation (a parametrised type holding a list)
        return None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _plan(args[0], seen)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        return _plan(members[0], seen) if len(members) == 1 and len(args) == 2 else None
    if annotation in _SEQUENCES or annotation is tuple:
        return _items(_plain)
    if annotation in _MAPPINGS:
        return _mapping(_plain, _plain)
    if origin in _SEQUENCES or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        inner = _plan(args[0], seen) if args else _plain
        return None if inner is None else _items(inner)
    if origin is tuple:
        return _positions([_plan(a, seen) for a in args])
    if origin in _MAPPINGS and len(args) == 2:
        keys, values = _plan(args[0], seen), _plan(args[1], seen)
        return None if keys is None and values is None else _mapping(keys, values)
    if isinstance(annotation, type):
        fields = _fields(annotation)
        if fields:
            return _object(annotation, fields, seen)
    return None


def _fields(cls: type) -> dict[str, Any]:
    """The declared fields of a dataclass or pydantic model, with their annotations."""
    if issubclass(cls, pydantic.BaseModel):
        return {name: f.annotation for name, f in cls.model_fields.items()}
    if dataclasses.is_dataclass(cls):
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # unresolvable: the codec reports it when it serialises
            return {}
        return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls)}
    return {}


def _object(cls: type, fields: dict[str, Any], seen: dict[Any, Check | None]) -> Check | None:
    checks: dict[str, Check] = {}

    def check(value: Any, where: str) -> Iterator[tuple[str, Any]]:
        if not isinstance(value, cls):
            return
        for name, inner in checks.items():
            yield from inner(getattr(value, name, None), f"{where}.{name}")

    seen[cls] = check  # a type that holds itself
    for name, annotation in fields.items():
        inner = _plan(annotation, seen)
        if inner is not None:
            checks[name] = inner
    seen[cls] = check if checks else None
    return seen[cls]


def _plain(value: Any, where: str) -> Iterator[tuple[str, Any]]:
    # A stack, not recursion: depth is bounded by the encoder's check, not by Python's.
    stack = [(value, where)]
    while stack:
        value, where = stack.pop()
        kind = type(value)
        if kind in _PLAIN:
            continue
        if kind is list:
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(value))))
        elif kind is dict:
            items = []
            for key, v in value.items():
                if type(key) is not str:
                    yield f"a key of {where}", key
                    return
                items.append((v, f"{where}[{key!r}]"))
            stack.extend(reversed(items))
        else:
            yield where, value
            return


def _items(inner: Check) -> Check:
    def check(value: Any, where: str) -> Iterator[tuple[str, Any]]:
        if isinstance(value, (list, tuple, set, frozenset)):
            for i, item in enumerate(value):
                yield from inner(item, f"{where}[{i}]")

    return check


def _positions(inners: list[Check | None]) -> Check | None:
    if all(inner is None for inner in inners):
        return None

    def check(value: Any, where: str) -> Iterator[tuple[str, Any]]:
        if isinstance(value, (list, tuple)):
            for i, (inner, item) in enumerate(zip(inners, value, strict=False)):
                if inner is not None:
                    yield from inner(item, f"{where}[{i}]")

    return check


def _mapping(keys: Check | None, values: Check | None) -> Check:
    def check(value: Any, where: str) -> Iterator[tuple[str, Any]]:
        if not isinstance(value, collections.abc.Mapping):
            return
        for key, item in value.items():
            if keys is not None and type(key) is not str:
                yield f"a key of {where}", key
            if values is not None:
                yield from values(item, f"{where}[{key!r}]")

    return check


def first(check: Check, value: Any, where: str) -> tuple[str, Any] | None:
    """The first value ``check`` finds in ``value`` that JSON would give back changed."""
    return next(iter(check(value, where)), None)


def refusal(what: str, where: str, value: Any, dumped: Any) -> str:
    """Why ``value`` (at ``where`` in ``what``), written to JSON as ``dumped``, is refused."""
    kind = type(value)
    name = kind.__qualname__
    if kind.__module__ != "builtins":
        name = f"{kind.__module__}.{name}"
    place = where if where.startswith("a key of") else f"the value at {where}"
    return (
        f"{what} cannot be stored unchanged: {place} is {_a(name)}, which the annotation leaves "
        f"untyped (Any, object or none), so it would come back as {_a(type(dumped).__name__)} "
        f"({_short(dumped)}). Give it its type in the annotation of the parameter, return or "
        "field (for example set[str], tuple[int, int], bytes, datetime, Decimal, a dataclass), "
        "or send plain JSON data (None, bool, int, float, str, lists, dicts with str keys)"
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _a(name: str) -> str:
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"
