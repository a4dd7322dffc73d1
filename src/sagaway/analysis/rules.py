"""The rule catalogue: stable codes, so suppressions and CI configurations keep working.

Codes are grouped by concern: ``SW1xx`` determinism of workflow code, ``SW2xx`` registration
of durable calls, ``SW3xx`` idempotency of activities, ``SW4xx`` sagas, ``SW5xx`` error
handling, ``SW6xx`` shared state, ``SW7xx`` changing running workflows (``sw.patched``), ``SW8xx``
AI agents (``sagaway.agents``).
``SW000`` is a file that could not be parsed. A code is never reused for another meaning;
docs/lint.md explains each one.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class Rule:
    """A rule's code, short name and one-line summary."""

    code: str
    name: str
    summary: str


RULES: dict[str, Rule] = {
    rule.code: rule
    for rule in (
        Rule("SW000", "syntax-error", "the file could not be parsed, so it was not checked"),
        Rule("SW101", "wall-clock", "a workflow reads the clock"),
        Rule("SW102", "randomness", "a workflow draws random values or random UUIDs"),
        Rule("SW103", "environment", "a workflow reads or writes environment variables"),
        Rule("SW104", "threads", "a workflow starts threads, processes or executors"),
        Rule("SW105", "direct-io", "a workflow does network, file, database or process I/O"),
        Rule("SW106", "non-durable-sleep", "a workflow sleeps with asyncio.sleep/time.sleep"),
        Rule("SW107", "set-iteration", "a workflow iterates a set, whose order varies"),
        Rule("SW108", "process-dependent", "a workflow uses hash() or id()"),
        Rule("SW201", "unregistered-call", "a durable call names an unregistered function"),
        Rule("SW202", "wrong-kind", "a durable call names a workflow as activity or vice versa"),
        Rule("SW203", "unawaited-call", "a durable call in a workflow is not awaited"),
        Rule("SW301", "write-without-key", "an activity writes without an idempotency key"),
        Rule("SW401", "saga-never-compensated", "compensations are added but never run"),
        Rule("SW402", "compensation-arguments", "a compensation is added without its arguments"),
        Rule("SW501", "broad-except", "bare except/BaseException around durable calls"),
        Rule("SW601", "module-state", "a workflow uses mutable module-level state"),
        Rule("SW701", "patch-id-not-literal", "a patched()/deprecate_patch() id is not a literal"),
        Rule("SW702", "patch-in-activity", "patched()/deprecate_patch() called in an activity"),
        Rule("SW703", "patch-and-deprecation", "one change id both patched and deprecated"),
        Rule("SW801", "agent-outside-step", "a workflow runs an AI agent or model outside a step"),
    )
}

_CODE_PREFIX = re.compile(r"^SW[0-9]{0,3}$")


def parse_codes(spec: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """Normalise ``"SW101,SW2"`` (or a list of such strings) to a tuple of code prefixes.

    Raises ValueError for an entry that matches no rule, so a typo in CI does not silently
    select nothing.
    """
    if spec is None:
        return None
    parts = [spec] if isinstance(spec, str) else list(spec)
    codes: list[str] = []
    for part in parts:
        for raw in re.split(r"[,\s]+", part):
            code = raw.strip().upper()
            if not code:
                continue
            if not _CODE_PREFIX.match(code) or not any(c.startswith(code) for c in RULES):
                known = ", ".join(RULES)
                raise ValueError(f"unknown rule code {raw.strip()!r} (known: {known})")
            codes.append(code)
    return tuple(codes)


def is_selected(code: str, select: tuple[str, ...] | None, ignore: tuple[str, ...] | None) -> bool:
    """flake8-style selection: a code is kept if a selected prefix matches and no ignored one."""
    if select is not None and not any(code.startswith(s) for s in select):
        return False
    return not (ignore and any(code.startswith(i) for i in ignore))
