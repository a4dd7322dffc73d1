"""Durable workflow signals: ``manager.signal(name).send(key, payload)`` and ``.receive(Type)``.

(Not OS signals: those are handled by ``sagaway worker``.) A signal is stored with the workflow
execution it was sent to; ``receive`` takes the oldest undelivered one of its name, so signals
sent early are kept, a repeated ``dedupe_id`` is delivered once, and several signals reach
successive ``receive`` calls in the order sent. A workflow with nothing to receive is unloaded
(WAITING: no worker task, no lease) until a signal or its timeout arrives.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar, overload

import pydantic

from sagaway import errors, identifiers
from sagaway._engine import audit, context, outages
from sagaway._engine.engine import EngineRef
from sagaway._engine.executor import current_execution
from sagaway._engine.text_checks import check_name, check_text

T = TypeVar("T")

MAX_NAME = identifiers.MAX_NAME


@functools.cache
def _adapter(tp: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(tp)


class Named:
    """A name workflows and their callers meet at (a signal's, an update's), checked once,
    on the engine the Manager has open (``engines``)."""

    WHAT = "a name"
    """What the name is called in the message that refuses it."""

    def __init__(self, engines: EngineRef, name: str) -> None:
        check_name(name, self.WHAT)
        self._engines = engines
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Signal(Named):
    """A named signal: ``manager.signal("approval")``."""

    WHAT = "a signal name"

    async def send(
        self,
        key: str,
        payload: Any = None,
        *,
        dedupe_id: str | None = None,
        reason: str | None = None,
    ) -> bool:
        """Send ``payload`` (JSON-serialisable) to the workflow under ``key``.

        ``reason``: why (an operator's signal): the send is recorded in the audit trail, as
        every send outside a workflow is when the Manager was made with ``audit="all"``.

        Returns False when ``dedupe_id`` was sent to this execution before (nothing sent
        again), also once it has ended: a retried callback is told "already sent".

        With a ``dedupe_id`` the send rides through an outage of the database or the Engine
        Server (up to the Manager's ``unavailable_timeout``): it is stored once however often
        it is tried (a retry whose first attempt was stored answers False). Without one it is
        tried once: a second attempt could store it twice.

        Raises:
            WorkflowNotFound: no workflow has this key.
            SagawayError: the workflow has ended (and ``dedupe_id``, if any, is new to it).
            PayloadError: the payload cannot be serialised or is too large.
            EngineUnavailable: the database or Engine Server did not answer (with a
                ``dedupe_id``: for ``unavailable_timeout`` seconds).
        """
        if dedupe_id is not None and (not isinstance(dedupe_id, str) or not dedupe_id):
            raise ValueError("dedupe_id must be a non-empty string")
        if dedupe_id is not None:
            check_text(dedupe_id, "dedupe_id")
        engine = self._engines.require()
        note = None
        if reason is not None or (engine.options.audit == "all" and current_execution() is None):
            note = audit.note("signal", reason, signal=self.name, dedupe_id=dedupe_id)
        what = f"signal {self.name!r} to workflow {key!r}"
        if dedupe_id is None:
            return await outages.once(
                engine,
                what,
                engine.send_signal(key, self.name, payload, None, note),
                "a signal without a dedupe_id is sent once (a retry could deliver it twice): "
                "it may or may not have been stored; send with dedupe_id= to have it tried "
                "again through an outage",
            )
        return await outages.ride(
            engine, what, lambda: engine.send_signal(key, self.name, payload, dedupe_id, note)
        )

    @overload
    async def receive(self, type_: type[T], *, timeout: float | None = None) -> T: ...

    @overload
    async def receive(self, type_: None = None, *, timeout: float | None = None) -> Any: ...

    async def receive(self, type_: Any = None, *, timeout: float | None = None) -> Any:
        """Inside a workflow: wait durably for the next signal of this name, decoded as ``type_``.

        Raises:
            SignalTimeout: nothing arrived within ``timeout`` seconds (in the workflow).
        """
        execution = current_execution()
        if execution is None:
            raise errors.SagawayError(
                "signal(...).receive() waits durably inside a workflow; outside one, send with "
                "signal(...).send(key, payload)"
            )
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be >= 0 seconds")
        adapter = _adapter(Any if type_ is None else type_)
        call_id, _ = context.next_call_id()
        return await execution.call_receive(self.name, adapter, timeout, call_id)
