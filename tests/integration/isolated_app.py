"""An application module as users write them: one module-level Manager, and workflows that use
it (``manager.sleep``). tests/integration/test_isolated_manager.py tests it as it is."""

from __future__ import annotations

import sagaway as sw

manager = sw.Manager(retention=3600.0)


@manager.register_activity
async def note(text: str) -> str:
    return text.upper()


@manager.register_workflow
async def remind(days: int) -> str:
    await manager.sleep(days * 86400)
    return await note(f"reminded after {days} days")
