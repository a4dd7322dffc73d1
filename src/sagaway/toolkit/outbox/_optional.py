"""Lazy imports of optional broker clients, with an error that says which extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, *, extra: str, package: str, what: str) -> ModuleType:
    """Import ``module`` now, or raise ImportError naming the extra that provides it.

    Broker clients are optional: ``import sagaway.outbox`` must work without them, so each
    publisher imports its client when it is first used.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{what} needs the {package!r} package, which is not installed: "
            f"pip install 'sagaway[{extra}]' (or pip install {package})"
        ) from exc
