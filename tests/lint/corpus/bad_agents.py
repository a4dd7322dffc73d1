# ruff: noqa
"""SW801: an AI agent run, or a model request, straight from workflow code."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.direct import model_request

import sagaway as sw
from sagaway.agents import DurableAgent

manager = sw.Manager()
agent = Agent("test")
durable = DurableAgent(manager, agent, name="helper")


@durable.tool
async def book_flight(city: str) -> str:
    return city


@agent.tool_plain
def weather(city: str) -> str:
    return "sunny"


@manager.register_activity
async def summarise(text: str) -> str:
    return (await agent.run(text)).output  # in an activity: recorded, fine


async def ask(prompt: str) -> str:
    return (await agent.run(prompt)).output  # expect: SW801


@manager.register_workflow
async def answer(prompt: str) -> str:
    first = await agent.run(prompt)  # expect: SW801
    async with agent.iter(prompt) as run:  # expect: SW801
        pass
    await model_request("test", [])  # expect: SW801
    await ask(prompt)
    await book_flight(prompt)  # expect: SW801
    weather(prompt)  # expect: SW801
    await summarise(prompt)
    return (await durable.run(prompt)).output  # through the integration: fine
