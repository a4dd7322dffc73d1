"""An application for the `sagaway` command tests: workflows that complete, fail, suspend and
wait for a signal. ``build(url)`` makes a Manager with them; ``manager`` is the one
``sagaway start --app tests.integration.cli_app:manager --db URL`` loads."""

from __future__ import annotations

from typing import Any

import sagaway as sw


class Declined(sw.CompletableError):
    """The order was declined."""


def build(url: str | None) -> sw.Manager:
    m = sw.Manager(url, poll_interval=0.05, recovery_interval=3600.0)

    @m.register_workflow(name="ok")
    async def ok(x: Any = None, y: Any = None) -> dict[str, Any]:
        return {"x": x, "y": y}

    @m.register_workflow(name="declined")
    async def declined() -> None:
        raise Declined("card declined", code="DECLINED")

    @m.register_workflow(name="broken")
    async def broken() -> None:
        raise RuntimeError("the service is down")

    @m.register_workflow(name="waits")
    async def waits() -> Any:
        return await m.signal("go").receive()

    return m


manager = build(None)
