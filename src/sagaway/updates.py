"""Updates: a synchronous, validated, durable request into a running workflow.

A caller sends ``manager.update("approve").send(key, payload, update_id=...)`` (or
``handle.update("approve", payload)``) and waits for the workflow's answer: accepted, with the
handler's result, or rejected, with the validator's reason. The workflow answers where it calls
``await manager.update("approve").handle(fn, validator=check)``.

The mechanism is the signal's, with a reply:

- The request is a signal named ``update:<name>`` whose ``dedupe_id`` is the update id and
  whose payload is ``{"id": update_id, "payload": ...}``: stored once per update id (a retried
  request finds the first one), kept until the workflow handles it, and waking it if it waits.
- ``handle`` receives it. The validator runs on the decoded payload while the signal is being
  taken, before anything is written to the workflow's history: a refusal marks the request
  rejected with the reason (``sagaway show`` lists it) and records no step. Acceptance is the
  ``signal`` step of the receive, written in the transaction that takes the request.
- The handler then runs as workflow code (its activities are durable calls), and its result
  (or its completable error) is recorded as the next step, of kind ``update``, named
  ``<name>:<update id>``: the answer. A crash between acceptance and answer replays the
  accepted request into the handler again; its recorded activities return their outcomes
  without running, so the handler's effect is applied once and the answer is written once.
- The caller reads the request's fate (rejected, or taken by a step) and the answer step,
  looking again until they are there. Any number of callers with one update id get the one
  answer, also after the workflow has ended.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
import uuid
from collections.abc import Callable
from typing import Any, TypedDict

import pydantic

from sagaway import errors, serialization
from sagaway._engine import audit, context, outages
from sagaway._engine.engine import Engine, EngineRef
from sagaway._engine.executor import Execution, current_execution
from sagaway._engine.text_checks import check_name, check_text
from sagaway.signals import Named
from sagaway.states import StepKind, StepStatus
from sagaway.store.records import AuditNote

PREFIX = "update:"
"""The signal name of an update's requests: ``update:<name>``."""

_FIRST_LOOK = 0.02
_LONGEST_LOOK = 0.5
"""Seconds between two looks for an answer: doubling from the first to the longest."""


class UpdateOptions(TypedDict, total=False):
    """How an update is sent: ``Update.send``'s options (each None unless given), which
    ``WorkflowHandle.update``, ``update_with_start`` and the sync handle pass on as they are.
    ``update_id`` names the update (sent again, it is applied once); ``timeout`` bounds the
    wait for the answer; ``result_type`` decodes the result (else plain JSON)."""

    update_id: str | None
    timeout: float | None
    result_type: Any


@dataclasses.dataclass(frozen=True)
class UpdateResult:
    """An accepted update's answer."""

    key: str
    name: str
    update_id: str
    result: Any
    """What the workflow's handler returned (plain JSON unless ``result_type`` was given)."""


def answer_name(name: str, update_id: str) -> str:
    """The name of the step that records the answer to update ``update_id``."""
    return f"{name}:{update_id}"


@functools.cache
def _envelope(tp: Any) -> pydantic.TypeAdapter[Any]:
    model = pydantic.create_model("UpdateRequest", id=(str, ...), payload=(tp, None))
    return pydantic.TypeAdapter(model)


@functools.cache
def _adapter(tp: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(tp)


def _payload_type(fn: Callable[..., Any]) -> Any:
    """The annotation of the handler's first parameter (Any without one)."""
    params = list(inspect.signature(fn).parameters.values())
    if not params:
        raise TypeError(f"update handler {fn!r} must take the update's payload as its argument")
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # an annotation that does not resolve: decode as plain JSON
        hints = {}
    return hints.get(params[0].name, Any)


class Update(Named):
    """A named update: ``manager.update("approve")``."""

    WHAT = "an update name"

    def __init__(self, engines: EngineRef, name: str) -> None:
        super().__init__(engines, name)
        check_name(PREFIX + name, self.WHAT)  # its requests' signal name: not too long either

    async def handle(
        self,
        fn: Callable[[Any], Any],
        *,
        validator: Callable[[Any], Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Inside a workflow: wait durably for the next update of this name and answer it.

        ``validator(payload)`` runs first, on the payload decoded as ``fn``'s first parameter's
        type: an exception it raises rejects the update (its message is the reason the caller
        gets; nothing enters the history) and the wait goes on for the next one. ``fn(payload)``
        (sync or async; workflow code: it may call activities) then answers it; its return
        value is the caller's result and this call's. A ``CompletableError`` it raises is the
        caller's answer too, and is raised here.

        Raises:
            SignalTimeout: no update was accepted within ``timeout`` seconds.
        """
        execution = current_execution()
        if execution is None:
            raise errors.SagawayError(
                "update(...).handle() answers updates inside a workflow; outside one, send "
                "with update(...).send(key, payload) or handle.update(name, payload)"
            )
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be >= 0 seconds")
        envelope = _envelope(_payload_type(fn))

        def validate(request: Any) -> str | None:
            if validator is None:
                return None
            try:
                verdict = validator(request.payload)
            except Exception as exc:  # the validator's refusal, whatever its type
                return str(exc) or type(exc).__name__
            return "rejected by the validator" if verdict is False else None

        call_id, _ = context.next_call_id()
        request = await execution.call_receive(
            PREFIX + self.name, envelope, timeout, call_id, validate
        )
        return await self._answer(execution, fn, request.id, request.payload)

    async def _answer(
        self, execution: Execution, fn: Callable[[Any], Any], update_id: str, payload: Any
    ) -> Any:
        """Run the handler on an accepted update and record its answer (the next step)."""
        step_name = answer_name(self.name, update_id)
        try:
            value = fn(payload)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            if not execution.engine.is_completable(exc):
                raise  # incompletable: suspended; a replay answers the accepted update again
            answer_id, _ = context.next_call_id()
            await execution.call_update_answer(answer_id, step_name, None, exc)
            raise
        encoded = serialization.encode_value(
            value, f"result of update {self.name!r}", execution.engine.payload_limit
        )
        answer_id, _ = context.next_call_id()
        await execution.call_update_answer(answer_id, step_name, encoded, None)
        return value

    async def send(
        self,
        key: str,
        payload: Any = None,
        *,
        update_id: str | None = None,
        timeout: float | None = None,
        result_type: Any = None,
    ) -> UpdateResult:
        """Send this update to the workflow under ``key`` and wait for its answer.

        ``update_id`` names the update: sent again (a retry, another caller), it is applied
        once and answered with the same result; the send then also rides through an outage of
        the database or the Engine Server. Without one, a fresh id is chosen. ``timeout``
        bounds the wait for the answer (None: until it comes); the update stays pending and
        is answered later all the same. ``result_type`` decodes the result (else plain JSON).

        Raises:
            UpdateRejected: the workflow's validator (or the payload's type) refused it.
            CompletableError: (or the ErrorMarshaler's type) the handler's business error.
            WorkflowNotFound: no workflow has this key.
            SagawayError: the workflow has ended without answering it.
            TimeoutError: no answer within ``timeout`` seconds.
        """
        if current_execution() is not None:
            raise errors.SagawayError(
                "update(...).send() waits for another workflow's answer: it is not a durable "
                "call; send a signal from a workflow instead"
            )
        if update_id is None:
            update_id = uuid.uuid4().hex
        if not isinstance(update_id, str) or not update_id:
            raise ValueError("update_id must be a non-empty string")
        check_text(update_id, "update_id")
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be >= 0 seconds")
        engine = self._engines.require()
        deadline = None if timeout is None else engine.clock.now() + timeout
        signal = PREFIX + self.name
        data = {"id": update_id, "payload": payload}
        what = f"update {self.name!r} to workflow {key!r}"
        note = _audit_note(engine, signal, update_id)
        await outages.ride(
            engine, what, lambda: engine.send_signal(key, signal, data, update_id, note)
        )
        record = await outages.ride(engine, what, lambda: engine.get(key))
        answer = await _answer(engine, key, record.run_id, self.name, update_id, deadline)
        if answer.status is StepStatus.FAILED:
            assert answer.error is not None
            raise serialization.error_from_record(answer.error, engine.marshaler)
        if result_type is None:
            result = None if answer.result is None else serialization.load_json(answer.result, what)
        else:
            result = _adapter(result_type).validate_json(answer.result or "null")
        return UpdateResult(key, self.name, update_id, result)


def _audit_note(engine: Engine, signal: str, update_id: str) -> AuditNote | None:
    """The request's audit entry: recorded as the signal it travels as when every send is
    (``Manager(audit="all")``: the console's and the command line's), so the trail says who
    asked for it."""
    if engine.options.audit != "all":
        return None
    return audit.note("signal", None, signal=signal, dedupe_id=update_id)


async def _answer(
    engine: Engine, key: str, run_id: str, name: str, update_id: str, deadline: float | None
) -> Any:
    """The answer step of ``update_id`` once recorded (``UpdateRejected`` if it was refused)."""
    signal, step_name = PREFIX + name, answer_name(name, update_id)
    pause = _FIRST_LOOK
    what = f"answer to update {name!r} of workflow {key!r}"
    while True:
        signals = await outages.ride(engine, what, lambda: engine.list_run_signals(run_id))
        request = next((s for s in signals if s.name == signal and s.dedupe_id == update_id), None)
        if request is not None and request.rejected is not None:
            raise errors.UpdateRejected(key, name, update_id, request.rejected)
        if request is not None and request.consumed_call is not None:
            steps = await outages.ride(engine, what, lambda: engine.load_steps(run_id))
            for step in steps:
                if (
                    step.kind is StepKind.UPDATE
                    and step.name == step_name
                    and step.status in (StepStatus.COMPLETED, StepStatus.FAILED)
                ):
                    return step
        record = await outages.ride(engine, what, lambda: engine.get_run(run_id))
        if record is None or record.status.ended:
            # Looked at once more: the answer may have been written with the end.
            steps = await outages.ride(engine, what, lambda: engine.load_steps(run_id))
            if not any(s.kind is StepKind.UPDATE and s.name == step_name for s in steps):
                status = "purged" if record is None else record.status.value
                raise errors.SagawayError(
                    f"workflow {key!r} ended ({status}) without answering update {name!r} "
                    f"({update_id})"
                )
            continue
        now = engine.clock.now()
        if deadline is not None and now >= deadline:
            raise TimeoutError(f"no answer to update {name!r} ({update_id}) of workflow {key!r}")
        wait = pause if deadline is None else min(pause, deadline - now)
        await engine.clock.sleep(wait)
        pause = min(pause * 2, _LONGEST_LOOK)
