"""Schedules declared at registration.

``@manager.register_workflow(schedule="*/5 * * * *")`` declares a schedule (``ScheduleSpec``);
a Manager that runs workers writes it into the database when it opens (creating it, or updating
its definition: an operator's pause stays).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sagaway._engine import cron
from sagaway._engine.engine import Engine
from sagaway.registry import default_name
from sagaway.schedules import ticks


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """A schedule declared with ``register_workflow(schedule=...)``."""

    schedule_id: str
    workflow: str
    cron: str
    timezone: str
    catch_up: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def declare(
    fn: Callable[..., Any],
    name: str | None,
    cron_expr: str | None,
    timezone: str,
    catch_up: str,
    schedule_args: Sequence[Any] | Mapping[str, Any] | None,
    schedule_id: str | None,
) -> ScheduleSpec | None:
    """A checked ``ScheduleSpec`` of the workflow ``fn`` registered as ``name`` (its default
    name if None); None without a cron expression."""
    if cron_expr is None:
        return None
    name = name or default_name(fn)
    cron.check(cron_expr, timezone, catch_up)
    if isinstance(schedule_args, Mapping):
        args: tuple[Any, ...] = ()
        kwargs = dict(schedule_args)
    else:
        args, kwargs = tuple(schedule_args or ()), {}
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as exc:
        raise ValueError(
            f"workflow {name!r} is scheduled but its arguments do not fit ({exc}): a schedule "
            "starts it with schedule_args (none given means no arguments)"
        ) from None
    return ScheduleSpec(schedule_id or name, name, cron_expr, timezone, catch_up, args, kwargs)


async def put_declared(engine: Engine, specs: Sequence[ScheduleSpec]) -> None:
    """Write the declared schedules (at open): new ones are created, others updated."""
    for spec in specs:
        defn = engine.registry.workflow(spec.workflow)
        args_json = defn.codec.encode_args(spec.args, spec.kwargs, engine.payload_limit)
        record = ticks.definition(
            engine,
            spec.schedule_id,
            defn,
            args_json,
            cron_expr=spec.cron,
            timezone=spec.timezone,
            catch_up=spec.catch_up,
            paused=False,
        )
        await ticks.put(engine, record, keep_paused=True)
