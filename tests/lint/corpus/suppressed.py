# ruff: noqa
"""Inline suppressions: `# sagaway: ignore[CODE]` and `# sagaway: ignore` on the line."""

from __future__ import annotations

import random
import time

import sagaway as sw

manager = sw.Manager()


@manager.register_workflow
async def suppressed() -> float:
    a = time.time()  # sagaway: ignore[SW101]
    b = random.random()  # sagaway: ignore
    c = time.time() + random.random()  # sagaway: ignore[SW101, SW102]
    d = time.time()  # sagaway: ignore[SW1]
    e = time.time()  # sagaway: ignore[SW102]  # expect: SW101
    f = time.time() + len("# sagaway: ignore")  # expect: SW101
    return a + b + c + d + e + f
