"""Modules that moved keep their old import paths: the same objects under both names."""

from __future__ import annotations

import importlib
import inspect

import pytest

MOVED = [
    ("sagaway.idempotency", "sagaway.toolkit.idempotency"),
    ("sagaway.localdb", "sagaway.toolkit.localdb"),
    ("sagaway.outbox", "sagaway.toolkit.outbox"),
    ("sagaway.outbox.relay", "sagaway.toolkit.outbox.relay"),
    ("sagaway.outbox.redis_streams", "sagaway.toolkit.outbox.redis_streams"),
    ("sagaway.outbox.nats_jetstream", "sagaway.toolkit.outbox.nats_jetstream"),
    ("sagaway.outbox.workflows", "sagaway.toolkit.outbox.workflows"),
    ("sagaway.scheduler", "sagaway.schedules.scheduler"),
]


@pytest.mark.parametrize(("old", "new"), MOVED)
def test_the_old_path_gives_the_same_objects(old: str, new: str) -> None:
    old_module, new_module = importlib.import_module(old), importlib.import_module(new)
    assert old_module.__all__, old
    for name in old_module.__all__:
        assert getattr(old_module, name) is getattr(new_module, name), f"{old}.{name}"


@pytest.mark.parametrize(("old", "new"), MOVED)
def test_the_old_path_names_every_public_name_of_the_new(old: str, new: str) -> None:
    """An alias that forgot a public name would break code importing it from the old path."""
    new_module = importlib.import_module(new)
    public = getattr(new_module, "__all__", None) or [
        name
        for name, value in vars(new_module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and value.__module__ == new
    ]
    assert set(public) <= set(importlib.import_module(old).__all__), old


def test_the_manager_methods_keep_their_names_and_docs() -> None:
    """Methods the Manager delegates to a collaborator show the collaborator's signature and
    docstring, and are bound to the Manager's own part."""
    import sagaway as sw

    manager = sw.Manager("sqlite:///:memory:")
    assert "from_step" in inspect.signature(sw.Manager.fork).parameters
    assert sw.Manager.purge.__doc__ and "older_than" in sw.Manager.purge.__doc__
    assert inspect.iscoroutinefunction(manager.list_workflows)
    assert manager.get_workflow("k").key == "k"
