"""The console's update form: send an update to a workflow and show its answer.

An update waits for the workflow's answer (docs/updates.md), so the POST does not redirect: it
renders the form again with the outcome above it, accepted with the handler's result, rejected
with the validator's reason, failed with the handler's error, or not answered yet within
``WAIT`` seconds (the update stays pending and is answered when the workflow runs its
handler). The confirmation page gives each form a fresh update id in a hidden field: the same
form sent twice (a reload of the answer) is the same update, applied once and answered alike.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

import sagaway as sw
from sagaway.console.views._forms import OWN_PAGES

WAIT = 10.0
"""Seconds the console waits for an update's answer before saying it is pending."""
SHOWN = 2000
"""Characters of a result or reason shown (the rest is cut, said so)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What became of an update sent from the console."""

    kind: str
    """``accepted``, ``rejected``, ``failed`` or ``pending``."""
    text: str
    """The handler's result (JSON), the rejection's reason, the error, or what pending means."""


def fresh_id() -> str:
    return "console-" + uuid.uuid4().hex


def _clip(text: str) -> str:
    return text if len(text) <= SHOWN else text[:SHOWN] + f"… ({len(text) - SHOWN} more)"


async def send(manager: sw.Manager, key: str, name: str, payload: Any, update_id: str) -> Outcome:
    """Send update ``name`` and wait up to ``WAIT`` seconds for its answer."""
    try:
        answer = await manager.update(name).send(key, payload, update_id=update_id, timeout=WAIT)
    except sw.UpdateRejected as exc:
        return Outcome("rejected", _clip(exc.reason))
    except TimeoutError:
        return Outcome(
            "pending",
            f"no answer within {WAIT:g} s: the update ({update_id}) stays pending; the workflow "
            "answers it when it runs its handler (send the same form again to look)",
        )
    except OWN_PAGES:
        raise  # the 404, 403 (the Engine Server refused the console's token) or 503 page
    except (sw.SagawayError, ValueError) as exc:
        return Outcome("failed", _clip(f"{type(exc).__name__}: {exc}"))
    return Outcome("accepted", _clip(json.dumps(answer.result, indent=2, default=str)))
