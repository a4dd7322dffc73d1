"""A Pydantic AI agent run inside a workflow: every model request and tool call a durable step.

``DurableAgent`` hands the agent one capability for the run. It wraps the model that serves each
request (``get_wrapper_model``) and the run's assembled toolset (``get_wrapper_toolset``), so
nothing the agent sends to a model or a tool escapes a step: a request is the activity
``<name>.model_request``, whose output is the model's response dumped by pydantic
(``ModelMessagesTypeAdapter``, JSON, never pickle); a tool call is ``<name>.tool.<tool>`` for a
tool declared with ``DurableAgent.tool`` (its output decoded back to the tool's return type, so a
compensation receives it typed), ``<name>.tool`` for any other tool of the agent. On a replay the
recorded outputs come back and the agent, fed the same responses and tool outputs, makes the same
calls: none is sent twice.

The run is one ``sw.Saga`` block: each completed tool call that declared a compensation adds it.
A completable error (a tool's business failure, a rejected or expired approval, the agent giving
up: ``AgentFailed``) or a cancel of the workflow compensates them in reverse order, each durably
and once, as any saga does. Activities run in the workflow's own task and process, so the live
run context, model settings and message history are handed to them as they are, not stored.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import typing
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pydantic
import pydantic_core
from pydantic_ai import exceptions as ai_errors
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset

import sagaway as sw
from sagaway.agents import _errors, _groups
from sagaway.agents._reading import RESPONSE
from sagaway.streams import check_name

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator

    from pydantic_ai import Agent
    from pydantic_ai.agent import AgentRunResult
    from pydantic_ai.models import StreamedResponse
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import RunContext
    from pydantic_ai.toolsets import ToolsetTool

DepsT = TypeVar("DepsT")
OutputT = TypeVar("OutputT")


class Approval(pydantic.BaseModel):
    """A person's decision on a tool call that needs approval (the signal's payload)."""

    approved: bool
    note: str = ""


class ApprovalRequest(pydantic.BaseModel):
    """What waits for approval: recorded as a step's output before the wait, so ``sagaway
    show`` and the console show the tool and its arguments beside the waiting signal."""

    tool: str
    args: dict[str, Any]
    signal: str
    timeout: float | None


@dataclasses.dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the model's text as it streams in, handed to ``DurableAgent(on_text=...)``.

    Live only: a request sent again (a retry, a crash in flight) streams its text again, with
    a higher ``attempt``; a replayed request streams nothing (its whole response is recorded).
    """

    workflow_key: str
    call_id: str
    """The model request's step, as ``sagaway show`` numbers it."""
    attempt: int
    text: str


OnText = Callable[[TextDelta], Awaitable[None]]


@dataclasses.dataclass(frozen=True, slots=True)
class _ToolSpec:
    name: str
    activity: Callable[..., Any]
    returns: pydantic.TypeAdapter[Any]
    compensate: Callable[..., Any] | str | None
    approval: bool


@dataclasses.dataclass(slots=True)
class _Run:
    saga: sw.Saga


_current_run: contextvars.ContextVar[_Run | None] = contextvars.ContextVar(
    "sagaway_agent_run", default=None
)


class DurableAgent(Generic[DepsT, OutputT]):
    """A Pydantic AI agent whose runs, inside a workflow, are sagas of durable steps.

    Args:
        manager: the Manager the workflow runs on; the agent's activities are registered on it
            now (build the ``DurableAgent`` at import time, beside the workflows).
        agent: the Pydantic AI agent (its model and tools are used as they are).
        name: prefix of the activities' names, as recorded: keep it stable across deploys.
        approval_signal: the signal a person sends to approve or reject (payload ``Approval``).
        approval_timeout: seconds to wait for it (None: forever); past it, ``ApprovalTimedOut``.
        model_retry: retry policy of model requests (transient API errors).
        tool_retry: retry policy of tool calls that raise ``sw.RetryableError``.
        on_text: called with each piece of the model's text as it streams in (the request is
            then sent streaming); live only, nothing of it is recorded.
        text_stream: the name of a workflow stream (``sw.write_stream``) to which the text of
            each model response is appended once it is recorded, as one durable item: what a
            client reads with ``handle.read_stream(name)`` or ``sagaway events KEY --stream``,
            from any process and again after a crash (None: no stream).
        parallel_tools: run the tool calls of one model response at once (Pydantic AI's
            default) rather than one after the other (the default here: a failing call then
            has no sibling in flight). In parallel, when one fails, the others are let finish
            before the failure goes on, so that what they did is known and compensated.
    """

    def __init__(
        self,
        manager: sw.Manager,
        agent: Agent[DepsT, OutputT],
        *,
        name: str,
        approval_signal: str = "approval",
        approval_timeout: float | None = 86400.0,
        model_retry: sw.RetryPolicy | None = None,
        tool_retry: sw.RetryPolicy | None = None,
        parallel_tools: bool = False,
        on_text: OnText | None = None,
        text_stream: str | None = None,
    ) -> None:
        if approval_timeout is not None and approval_timeout < 0:
            raise ValueError("approval_timeout must be >= 0 seconds, or None")
        if text_stream is not None:
            check_name(text_stream, "stream name")
        manager.signal(approval_signal)  # a bad signal name fails here, not at the first wait
        self.manager = manager
        self.agent = agent
        self.name = name
        self.approval_signal = approval_signal
        self.approval_timeout = approval_timeout
        self._tool_retry = tool_retry
        self.parallel_tools = parallel_tools
        self.on_text = on_text
        self.text_stream = text_stream
        self._tools: dict[str, _ToolSpec] = {}
        self._model_request = manager.register_activity(
            name=f"{name}.model_request", retry=model_retry
        )(_model_request)
        self._other_tool = manager.register_activity(name=f"{name}.tool", retry=tool_retry)(
            _named_tool_call
        )
        self._approval_request = manager.register_activity(name=f"{name}.approval_request")(
            _approval_request
        )

    def tool(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        compensate: Callable[..., Any] | str | None = None,
        approval: bool = False,
    ) -> Any:
        """Declare a tool of the agent (``agent.tool_plain``) as a durable step.

        ``compensate``: a registered activity that undoes a completed call; it receives the
        tool's output. ``approval``: the call waits for ``approval_signal`` before it runs.
        Bare (``@durable.tool``) or with options.
        """

        def declare(func: Callable[..., Any]) -> Callable[..., Any]:
            if compensate is not None and not (callable(compensate) or isinstance(compensate, str)):
                raise TypeError("compensate must be a registered activity (function or name)")
            tool_name = func.__name__
            if tool_name in self._tools:
                raise ValueError(f"tool {tool_name!r} is declared twice on {self.name!r}")
            self.agent.tool_plain(func)
            try:
                returns = typing.get_type_hints(func).get("return", Any)
            except Exception as exc:
                raise TypeError(f"tool {tool_name!r}: unresolvable annotations ({exc})") from exc
            activity = self.manager.register_activity(
                name=f"{self.name}.tool.{tool_name}", retry=self._tool_retry
            )(_tool_activity())
            self._tools[tool_name] = _ToolSpec(
                tool_name, activity, pydantic.TypeAdapter(returns), compensate, approval
            )
            return func

        return declare if fn is None else declare(fn)

    async def run(
        self, user_prompt: str | None = None, *, saga: sw.Saga | None = None, **kwargs: Any
    ) -> AgentRunResult[OutputT]:
        """``agent.run(...)`` inside a workflow, as a saga of durable steps.

        Takes ``agent.run``'s arguments. Raises what the run raised; a ``pydantic_ai``
        ``AgentRunError`` (the model misbehaved, a usage limit) as ``AgentFailed``, a completable
        error, after the compensations. A cancel of the workflow compensates and goes on.

        ``saga``: the workflow's own ``sw.Saga`` to add the tools' compensations to, so that
        they are undone with the workflow's other steps, also when a later step fails. Without
        it the run is a saga block of its own: its tool calls are undone if the run fails, and
        kept once it has succeeded.
        """
        capabilities = [*(kwargs.pop("capabilities", None) or ()), _Durability(self)]
        token = _current_run.set(_Run(sw.Saga() if saga is None else saga))
        try:
            with ToolManager.parallel_execution_mode(
                "parallel" if self.parallel_tools else "sequential"
            ):
                if saga is not None:  # the caller's block compensates
                    return await self._run_agent(user_prompt, capabilities, kwargs)
                run = _current_run.get()
                assert run is not None
                async with run.saga:
                    return await self._run_agent(user_prompt, capabilities, kwargs)
        finally:
            _current_run.reset(token)

    async def _run_agent(
        self, user_prompt: str | None, capabilities: list[Any], kwargs: dict[str, Any]
    ) -> AgentRunResult[OutputT]:
        try:
            return await self.agent.run(user_prompt, capabilities=capabilities, **kwargs)
        except BaseExceptionGroup as group:  # tools called in parallel
            raise _groups.representative(group) from group
        except ai_errors.AgentRunError as exc:
            raise _errors.AgentFailed(f"agent {self.name!r} failed: {exc}") from exc

    async def _call_tool(
        self,
        toolset: AbstractToolset[Any],
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[Any],
        tool: ToolsetTool[Any],
    ) -> Any:
        spec = self._tools.get(name)
        if spec is not None and spec.approval:
            await self._approve(name, tool_args)
        activity = self._other_tool if spec is None else spec.activity
        outcome = await self.manager.activity(
            activity, toolset, name, tool_args, ctx, tool
        ).execute_get()
        if "retry" in outcome:
            raise ai_errors.ModelRetry(outcome["retry"])
        output = outcome.get("output")
        if spec is None:
            return output
        value = spec.returns.validate_python(output)
        run = _current_run.get()
        if spec.compensate is not None and run is not None:
            run.saga.add_compensation(spec.compensate, value)
        return value

    async def _approve(self, tool: str, tool_args: dict[str, Any]) -> None:
        request = ApprovalRequest(
            tool=tool,
            args=pydantic_core.to_jsonable_python(tool_args),
            signal=self.approval_signal,
            timeout=self.approval_timeout,
        )
        await self.manager.activity(self._approval_request, request).execute_get()
        try:
            decision = await self.manager.signal(self.approval_signal).receive(
                Approval, timeout=self.approval_timeout
            )
        except sw.SignalTimeout as exc:
            raise _errors.ApprovalTimedOut(
                f"no decision on tool {tool!r} within {self.approval_timeout}s", code="TIMEOUT"
            ) from exc
        if not decision.approved:
            note = f": {decision.note}" if decision.note else ""
            raise _errors.ApprovalRejected(f"tool {tool!r} was rejected{note}", code="REJECTED")


class _Durability(AbstractCapability[Any]):
    """The capability a durable run adds: its model and toolset wrapped in steps."""

    def __init__(self, owner: DurableAgent[Any, Any]) -> None:
        super().__init__()
        self._owner = owner

    def get_wrapper_model(self, model: Model) -> Model | None:
        if isinstance(model, _DurableModel):
            return None
        return _DurableModel(model, self._owner)

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        return _DurableToolset(toolset, self._owner)


class _DurableModel(WrapperModel):
    """Each request an activity; its response the step's output."""

    def __init__(self, wrapped: Model, owner: DurableAgent[Any, Any]) -> None:
        super().__init__(wrapped)
        self._owner = owner

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        owner = self._owner
        dumped = await owner.manager.activity(
            owner._model_request,
            self.wrapped,
            messages,
            model_settings,
            model_request_parameters,
            owner.on_text,
        ).execute_get()
        response = RESPONSE.validate_python(dumped)
        text = "".join(part.content for part in response.parts if isinstance(part, TextPart))
        if owner.text_stream is not None and text:
            await sw.write_stream(owner.text_stream, text)  # a step: once, replayed after
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncGenerator[StreamedResponse]:
        raise _errors.StreamingNotDurable(
            "a durable agent run records each model response whole: call DurableAgent.run() "
            "without an event_stream_handler; for live text, use DurableAgent(on_text=...)"
        )
        yield  # pragma: no cover - makes this an async generator


@dataclasses.dataclass
class _DurableToolset(WrapperToolset[Any]):
    """Each tool call an activity (after its approval, if it needs one)."""

    owner: DurableAgent[Any, Any] | None = None

    def __init__(self, wrapped: AbstractToolset[Any], owner: DurableAgent[Any, Any]) -> None:
        super().__init__(wrapped)
        self.owner = owner

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        owner = self.owner
        assert owner is not None
        call = owner._call_tool(self.wrapped, name, tool_args, ctx, tool)
        if not owner.parallel_tools:
            return await call
        # Pydantic AI cancels the sibling calls of a call that failed: a step cancelled in
        # flight would leave its effect unknown, so it is let finish (and its compensation
        # added) before the cancel goes on. A second cancel (shutdown) stops it.
        step = asyncio.ensure_future(call)
        try:
            return await asyncio.shield(step)
        except asyncio.CancelledError:
            try:
                await asyncio.wait({step})
            finally:
                step.cancel()
            raise


async def _model_request(
    model: Any, messages: Any, model_settings: Any, parameters: Any, on_text: Any
) -> dict[str, Any]:
    """The activity of a model request: the response, dumped to JSON by pydantic."""
    async with model:
        if on_text is None:
            response = await model.request(messages, model_settings, parameters)
        else:
            response = await _streamed(model, messages, model_settings, parameters, on_text)
    dumped: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python([response], mode="json")
    return dumped[0]


async def _streamed(
    model: Model,
    messages: list[ModelMessage],
    model_settings: ModelSettings | None,
    parameters: ModelRequestParameters,
    on_text: OnText,
) -> ModelResponse:
    """Send the request streaming, handing each piece of text to ``on_text``; the response."""
    info = sw.activity_info()
    async with model.request_stream(messages, model_settings, parameters) as stream:
        async for event in stream:
            text = ""
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                text = event.part.content
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                text = event.delta.content_delta
            if text:
                await on_text(TextDelta(info.workflow_key, info.call_id, info.attempt, text))
        return stream.get()


def _tool_activity() -> Callable[..., Any]:
    """A new function for a declared tool's activity (each registered under its own name)."""

    async def tool_call(
        toolset: Any, name: str, tool_args: Any, ctx: Any, tool: Any
    ) -> dict[str, Any]:
        return await _run_tool(toolset, name, tool_args, ctx, tool)

    return tool_call


async def _named_tool_call(
    toolset: Any, name: str, tool_args: Any, ctx: Any, tool: Any
) -> dict[str, Any]:
    """The activity of a call of a tool not declared with ``DurableAgent.tool``."""
    return {"tool": name, **await _run_tool(toolset, name, tool_args, ctx, tool)}


async def _run_tool(toolset: Any, name: str, tool_args: Any, ctx: Any, tool: Any) -> dict[str, Any]:
    """Call the tool; its output as JSON, or the model's retry request (not an error of the
    step: the model is asked again with the message)."""
    try:
        output = await toolset.call_tool(name, tool_args, ctx, tool)
    except ai_errors.ModelRetry as retry:
        return {"retry": retry.message}
    return {"output": pydantic_core.to_jsonable_python(output)}


async def _approval_request(request: ApprovalRequest) -> ApprovalRequest:
    """Records what waits for approval (the step's output)."""
    return request
