"""The one exception a run raises when the agent's parallel tool calls raised a group."""

from __future__ import annotations

import sagaway as sw


def leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """The group's exceptions, nested groups flattened, in order."""
    found: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            found.extend(leaves(exc))
        else:
            found.append(exc)
    return found


def representative(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """What the run raises for ``group``: a control exception of the engine first (a cancel,
    an unload for a wait: ``BaseException`` that is no ``Exception``), then a business failure
    (completable: the saga compensates), else the first error."""
    found = leaves(group)
    for exc in found:
        if not isinstance(exc, Exception):
            return exc
    for exc in found:
        if isinstance(exc, sw.CompletableError):
            return exc
    return found[0]
