"""Keyword arguments that were renamed: the old name still works for a while, with a
``DeprecationWarning`` that says what to write instead."""

from __future__ import annotations

import warnings
from typing import TypeVar

T = TypeVar("T")


def keyword(
    call: str,
    old: str,
    old_value: T | None,
    new: str,
    new_value: T | None,
    why: str,
    *,
    stacklevel: int = 3,
) -> T | None:
    """The value given under ``new``, or under ``old`` (warned about, ``why`` said).

    ``call`` names the call in messages (``execute()``). Both at once is a ``TypeError``: it
    is one setting. The warning points at the caller of the public function that calls this
    (``stacklevel`` frames up from here).
    """
    if old_value is None:
        return new_value
    if new_value is not None:
        raise TypeError(f"{call}: pass {new}= only ({old}= is its old name)")
    warnings.warn(
        f"{call}: {old}= is deprecated, use {new}= ({why})",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    return old_value


DEADLINE_WHY = "the workflow's own deadline, in seconds from its start; timeout= bounds a wait"


def deadline(call: str, timeout: float | None, deadline: float | None) -> float | None:
    """A workflow start's ``deadline=``, or its old name ``timeout=`` (warned about)."""
    return keyword(call, "timeout", timeout, "deadline", deadline, DEADLINE_WHY, stacklevel=4)


def workflow_deadline(
    call: str, workflow_timeout: float | None, deadline: float | None
) -> float | None:
    """A start-and-wait's ``deadline=``, or its old name ``workflow_timeout=`` (warned about)."""
    return keyword(
        call, "workflow_timeout", workflow_timeout, "deadline", deadline, DEADLINE_WHY, stacklevel=4
    )
