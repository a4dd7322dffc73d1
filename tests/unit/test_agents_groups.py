"""Which exception a durable run raises when parallel tool calls raised a group."""

from __future__ import annotations

import pytest

import sagaway as sw

pytest.importorskip("pydantic_ai")

from sagaway.agents import _groups


class Full(sw.CompletableError):
    """No room."""


def test_a_control_exception_first_then_a_business_failure_then_the_first() -> None:
    cancel = sw.Cancelled("stop")
    full = Full("no room")
    bug = RuntimeError("bug")
    nested = BaseExceptionGroup("tools", [bug, BaseExceptionGroup("more", [full, cancel])])
    assert _groups.leaves(nested) == [bug, full, cancel]
    assert _groups.representative(nested) is cancel
    assert _groups.representative(ExceptionGroup("tools", [bug, full])) is full
    assert _groups.representative(ExceptionGroup("tools", [bug, ValueError()])) is bug
