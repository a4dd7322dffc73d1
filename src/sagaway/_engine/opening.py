"""Opening a Manager's Engine over its store (with the codecs, if any): the store, the clock
it reads (the database server's on PostgreSQL, kept in step by a task), and its notices."""

from __future__ import annotations

import asyncio

from sagaway import codecs
from sagaway._engine.engine import Engine
from sagaway._engine.options import EngineOptions
from sagaway._engine.server_clock import server_clock
from sagaway.clock import Clock
from sagaway.registry import Registry
from sagaway.store.base import Store


async def open_engine(
    store: Store,
    *,
    codec: codecs.Chain | None,
    options: EngineOptions,
    clock: Clock,
    registry: Registry,
    runs_workflows: bool,
) -> tuple[Engine, asyncio.Task[None] | None]:
    """The Engine over ``store`` (not yet open), and the task keeping its clock in step with
    the server's (None: no such task); on failure, nothing is left open."""
    if codec is not None:
        store = codecs.CodecStore(store, codec)
    await store.open()
    task: asyncio.Task[None] | None = None
    try:
        engine_clock, task = await server_clock(store, clock)
        engine = Engine(store, options, clock=engine_clock, registry=registry)
        await engine.listen(runs_workflows=runs_workflows)
    except BaseException:
        if task is not None:
            task.cancel()
        await store.close()
        raise
    return engine, task
