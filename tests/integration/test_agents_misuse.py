"""Misuse of ``DurableAgent`` fails when it is built or declared, with what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

import sagaway as sw

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from sagaway.agents import DurableAgent


def make(tmp_path: Path) -> tuple[sw.Manager, Agent[None, str]]:
    return sw.Manager(f"sqlite:///{tmp_path}/misuse.db"), Agent(TestModel())


def test_bad_options_fail_at_construction(tmp_path: Path) -> None:
    manager, agent = make(tmp_path)
    with pytest.raises(ValueError, match="signal name"):
        DurableAgent(manager, agent, name="a", approval_signal="")
    with pytest.raises(ValueError, match="approval_timeout"):
        DurableAgent(manager, agent, name="b", approval_timeout=-1)


def test_names_are_registered_once(tmp_path: Path) -> None:
    manager, agent = make(tmp_path)
    durable = DurableAgent(manager, agent, name="travel")
    with pytest.raises(sw.AlreadyRegistered):
        DurableAgent(manager, Agent(TestModel()), name="travel")

    @durable.tool
    async def book(city: str) -> str:
        return city

    with pytest.raises(ValueError, match="declared twice"):
        durable.tool(book)
    with pytest.raises(TypeError, match="registered activity"):
        durable.tool(compensate=42)(book)  # type: ignore[arg-type]


async def test_a_run_outside_a_workflow_says_where_it_belongs(tmp_path: Path) -> None:
    manager, agent = make(tmp_path)
    durable = DurableAgent(manager, agent, name="outside")
    async with manager:
        with pytest.raises(sw.SagawayError, match="inside a workflow"):
            await durable.run("hello")
