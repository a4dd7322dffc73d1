"""Derived idempotency keys: unique by construction (see sagaway._engine.keys)."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagaway._engine import keys
from sagaway.states import WorkflowStatus
from sagaway.store.records import WorkflowRecord


def record(key: str, key_space: str | None) -> WorkflowRecord:
    return WorkflowRecord(
        run_id="r",
        key=key,
        name="flow",
        args="{}",
        args_hash="h",
        status=WorkflowStatus.RUNNING,
        result=None,
        error=None,
        parent_key=None,
        created_at=0.0,
        updated_at=0.0,
        ended_at=None,
        lease_owner=None,
        lease_expires_at=None,
        next_run_at=None,
        suspend_count=0,
        key_space=key_space,
    )


def test_key_space_escapes_separators() -> None:
    assert keys.key_space("order-7", "r1", replacing=False) == "order-7"
    assert keys.key_space("order-7/1", "r1", replacing=False) == "order-7%2F1"
    assert keys.key_space("a%2Fb@c", "r1", replacing=False) == "a%252Fb%40c"
    assert keys.key_space("order-7", "r1", replacing=True) == "order-7@r1"


def test_executions_from_before_key_spaces_keep_their_keys() -> None:
    assert keys.derived_key(record("order-7/1", None), "1") == "order-7/1/1"
    assert keys.derived_key(record("order-7/1", "order-7%2F1"), "1") == "order-7%2F1/1"


workflow_keys = st.text(alphabet="ab/%@1", min_size=1, max_size=6)
call_ids = st.lists(st.integers(1, 3), min_size=1, max_size=3).map(
    lambda parts: "/".join(map(str, parts))
)


@given(
    st.tuples(workflow_keys, st.sampled_from(["r1", "r2"]), st.booleans(), call_ids),
    st.tuples(workflow_keys, st.sampled_from(["r1", "r2"]), st.booleans(), call_ids),
)
def test_two_different_calls_never_share_a_key(
    a: tuple[str, str, bool, str], b: tuple[str, str, bool, str]
) -> None:
    """Calls differ when their (workflow key, run, call id) differ; a run that replaced
    another is named by its run id, a first run by its key alone."""
    key_a, run_a, replacing_a, call_a = a
    key_b, run_b, replacing_b, call_b = b
    ident_a = (key_a, run_a if replacing_a else None, call_a)
    ident_b = (key_b, run_b if replacing_b else None, call_b)
    derived_a = keys.derived_key(
        dataclasses.replace(
            record(key_a, None), key_space=keys.key_space(key_a, run_a, replacing=replacing_a)
        ),
        call_a,
    )
    derived_b = keys.derived_key(
        dataclasses.replace(
            record(key_b, None), key_space=keys.key_space(key_b, run_b, replacing=replacing_b)
        ),
        call_b,
    )
    assert (derived_a == derived_b) == (ident_a == ident_b)


def test_parent_calls_and_child_calls_differ() -> None:
    """The shapes that used to collide: a child keyed '<parent>/<n>' against the parent's
    branch calls, for small trees exhaustively."""
    parent = record("P", keys.key_space("P", "r", replacing=False))
    derived: dict[str, tuple[str, str]] = {}
    for n, m in itertools.product(range(1, 4), repeat=2):
        child_key = keys.derived_key(parent, str(n))
        child = record(child_key, keys.key_space(child_key, "r", replacing=False))
        for owner, call in ((parent, f"{n}/{m}"), (child, str(m))):
            key = keys.derived_key(owner, call)
            assert derived.setdefault(key, (owner.key, call)) == (owner.key, call)


CHOOSER = record("chooser", keys.key_space("chooser", "r", replacing=False))
"""A workflow with a key space choosing a child key (the refusal depends on the key alone)."""


@given(workflow_keys, st.sampled_from(["r1", "r2"]), st.booleans(), call_ids)
def test_every_derived_key_is_refused_as_a_chosen_child_key(
    key: str, run: str, replacing: bool, call: str
) -> None:
    derived = keys.derived_key(record(key, keys.key_space(key, run, replacing=replacing)), call)
    with pytest.raises(ValueError, match="has the form <key>/<call number>"):
        keys.check_chosen_child_key(derived, CHOOSER)


@given(workflow_keys, call_ids)
def test_an_execution_from_before_key_spaces_may_not_choose_its_own_derived_keys(
    key: str, call: str
) -> None:
    """Such an execution derives ``<its key>/<call id>``, and its key may hold ``/``."""
    legacy = record(key, None)
    with pytest.raises(ValueError, match=f"of call {call} of workflow"):
        keys.check_chosen_child_key(keys.derived_key(legacy, call), legacy)


@pytest.mark.parametrize(
    "chosen",
    [
        "order-7",
        "order-7/payment",
        "order-7/2-kid",
        "order-7/2/x",
        "a/b/1",
        "/1",
        "7/",
        "x/1.5",
        "order-7/0",
        "invoice/2024/0012",
    ],
)
def test_a_chosen_child_key_the_engine_cannot_derive_is_accepted(chosen: str) -> None:
    """``a/b/1`` is not derived by a workflow with a key space (``a/b``'s is ``a%2Fb``); call
    numbers start at 1 and have no leading zero."""
    keys.check_chosen_child_key(chosen, CHOOSER)


def test_the_refusal_names_the_call_the_workflow_and_a_key_to_use_instead() -> None:
    with pytest.raises(ValueError) as refused:
        keys.check_chosen_child_key("order-7/2/1", CHOOSER)
    message = str(refused.value)
    assert "call 2/1 of workflow 'order-7'" in message
    assert "'order-7/2/1-child'" in message
    with pytest.raises(ValueError, match="call 3 of workflow 'p/1'"):
        keys.check_chosen_child_key("p%2F1@r9/3", CHOOSER)  # key space of a replacing run
