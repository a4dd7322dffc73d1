"""The web console (``sagaway ui``): a small Starlette app over the public API.

It lists workflows with live counts, shows one workflow's steps on a time axis, and lets an
operator retry, cancel, terminate and signal workflows. It reads and acts through a
``sagaway.Manager`` only, so it works on SQLite, PostgreSQL and an Engine Server alike. Needs
the ``sagaway[ui]`` extra (starlette, jinja2, uvicorn, python-multipart).
"""

from __future__ import annotations

from sagaway.console.app import create_app
from sagaway.console.config import ConsoleConfig

__all__ = ["ConsoleConfig", "create_app"]
