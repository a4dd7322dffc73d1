"""A copy of a record with some fields changed: ``dataclasses.replace`` for the hot path.

``dataclasses.replace`` walks the record's fields in Python on every call (their kinds, their
init flags, one ``getattr`` each); here the field names and a getter for all of them are found
once per record class, and a copy reads every field in one C call. For the records of
``sagaway.store.records`` (every field an ``__init__`` parameter) the result is the same.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_READERS: dict[type[Any], tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]] = {}


def changed(record: T, **changes: Any) -> T:
    """``record`` with the fields ``changes`` names set to its values (``TypeError`` for a
    name that is not a field)."""
    cls = type(record)
    reader = _READERS.get(cls)
    if reader is None:
        reader = _READERS[cls] = _reader(cls)
    names, read = reader
    values = dict(zip(names, read(record), strict=True))
    if not changes.keys() <= values.keys():  # looks up each change; builds no set
        unknown = sorted(changes.keys() - values.keys())
        raise TypeError(f"{cls.__name__} has no field {unknown[0]!r}")
    values.update(changes)
    return cls(**values)


def _reader(cls: type[Any]) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]:
    fields = dataclasses.fields(cls)
    if any(not f.init for f in fields):
        raise TypeError(f"{cls.__name__} has a field its __init__ does not take")
    names = tuple(f.name for f in fields)
    if len(names) < 2:
        raise TypeError(f"{cls.__name__}: use dataclasses.replace for a record of one field")
    return names, operator.attrgetter(*names)
