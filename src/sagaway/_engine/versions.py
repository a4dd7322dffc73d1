"""Code versions: which version of the application's code created an execution, and which
versions a worker runs (blue/green deploys).

A process says its version with ``Manager(version=...)`` (default ``$SAGAWAY_CODE_VERSION``);
each execution it creates records it (``WorkflowRecord.code_version``; None: unversioned). A
worker given ``run_versions`` claims only executions of those versions, so the workers of a new
deploy take the executions the new code started while the old workers drain the old ones.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Collection, Mapping

ENV_VAR = "SAGAWAY_CODE_VERSION"
"""The default of ``Manager(version=...)``."""
UNVERSIONED = "unversioned"
"""How the CLI (``--versions``, ``--version``) names executions without a code version."""
MAX_LENGTH = 100

RunVersions = frozenset[str | None] | None
"""Versions a worker runs: None for every version; None in the set for unversioned ones."""


def check_code_version(value: object, what: str = "version") -> str:
    """``value`` if it can name a code version, else ``ValueError`` (``TypeError`` for a
    non-string) saying why. Commas are refused (``--versions`` splits on them), and so is the
    word ``unversioned`` (which stands for executions without a version)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string such as '2026.12.1', not {type(value).__name__}")
    problem = _problem(value)
    if problem is not None:
        raise ValueError(f"{what} {value!r} {problem}")
    return value


def _problem(value: str) -> str | None:
    if not value or value.strip() != value:
        return "must be non-empty, without surrounding spaces"
    if len(value) > MAX_LENGTH:
        return f"is too long ({len(value)} characters; at most {MAX_LENGTH})"
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in value):
        return "must not contain control characters"
    if "," in value:
        return "must not contain commas"
    if value == UNVERSIONED:
        return f"is reserved: {UNVERSIONED!r} names executions without a code version"
    return None


def default_code_version(environ: Mapping[str, str] | None = None) -> str | None:
    """``$SAGAWAY_CODE_VERSION`` (checked), or None when it is unset or empty."""
    value = (os.environ if environ is None else environ).get(ENV_VAR) or None
    return None if value is None else check_code_version(value, f"${ENV_VAR}")


def check_run_versions(value: Collection[str | None] | None) -> RunVersions:
    """``Manager(run_versions=...)`` as a frozenset (None: every version)."""
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError("run_versions must be a collection of versions, such as {'2026.12.1'}")
    chosen = frozenset(value)
    if not chosen:
        raise ValueError("run_versions must name at least one version (None: run every version)")
    for version in chosen:
        if version is not None:
            check_code_version(version, "a run_versions entry")
    return chosen


def parse_versions(text: str) -> frozenset[str | None]:
    """A comma-separated list of versions (``unversioned``: executions without one)."""
    names = [name.strip() for name in text.split(",")]
    if not text.strip() or any(not name for name in names):
        raise ValueError(f"give comma-separated version names, not {text!r}")
    return frozenset(None if n == UNVERSIONED else check_code_version(n) for n in names)


def runs(run_versions: RunVersions, code_version: str | None) -> bool:
    """Whether a worker of ``run_versions`` runs an execution of ``code_version``."""
    return run_versions is None or code_version in run_versions


def label(code_version: str | None) -> str:
    """A code version as the CLI and the console show it."""
    return UNVERSIONED if code_version is None else code_version
