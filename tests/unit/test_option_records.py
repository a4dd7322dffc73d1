"""Options written once as records: a store verb derived from the contract's signature, and
the keyword records of starts and registration, which still refuse an unknown name."""

from __future__ import annotations

from typing import Any

import pytest

import sagaway as sw
from sagaway._engine.start_options import split_placing
from sagaway.store.contract import Store
from sagaway.store.forwarding import derived


class _Echo:
    async def _values(self, values: dict[str, Any]) -> dict[str, Any]:
        return values

    suspend_workflow = derived(Store.suspend_workflow, _values)
    finish_workflow = derived(Store.finish_workflow, _values)


async def test_a_derived_verb_gets_its_arguments_by_name_with_the_defaults() -> None:
    echo: Any = _Echo()
    got = await echo.finish_workflow(
        "r1", token="t", status=sw.WorkflowStatus.COMPLETED, result="1", error=None, now=2.0
    )
    assert got == {
        "run_id": "r1",
        "token": "t",
        "status": sw.WorkflowStatus.COMPLETED,
        "result": "1",
        "error": None,
        "now": 2.0,
        "final_step": None,
        "has_parent": True,
        "cancel_seen": False,
    }


async def test_a_derived_verb_refuses_a_missing_or_unknown_argument() -> None:
    echo: Any = _Echo()
    with pytest.raises(TypeError, match="next_run_at"):
        await echo.suspend_workflow("r", token="t", error="e", now=1.0)
    with pytest.raises(TypeError, match="later"):
        await echo.suspend_workflow("r", token="t", error="e", now=1.0, next_run_at=2, later=1)


def test_the_placing_options_split_into_the_keyed_and_the_asked() -> None:
    keyed, asked = split_placing({"ordering_key": "o", "priority": 5}, "execute()")
    assert (keyed.ordering_key, keyed.debounce_key, asked) == ("o", None, (5, None, None))
    with pytest.raises(TypeError, match="execute\\(\\) got an unexpected keyword argument 'prio'"):
        split_placing({"prio": 5}, "execute()")  # type: ignore[typeddict-unknown-key]


def test_registration_refuses_an_unknown_option() -> None:
    manager = sw.Manager("sqlite:///:memory:")
    with pytest.raises(TypeError, match="register_activity\\(\\) got an unexpected keyword"):
        manager.register_activity(retries=3)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="register_workflow\\(\\) got an unexpected keyword"):
        manager.register_workflow(taskqueue="q")  # type: ignore[call-overload]
