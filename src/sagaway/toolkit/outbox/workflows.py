"""A publisher that starts Sagaway workflows: choreography meets orchestration.

A service announces a fact through its outbox ("order placed"); instead of another service
reacting to it by hand, the relay hands the message to :class:`WorkflowPublisher`, which starts
the workflow routed to that topic with the message id as the workflow's idempotency key. A
message delivered twice therefore attaches to the workflow the first delivery started: the
business operation never runs twice (``OnConflict.ATTACH``; the key names one execution for as
long as its record is kept).

The payload is the workflow's arguments as a JSON object keyed by parameter name, the form
Sagaway itself stores; it is decoded by the workflow's annotations (dataclasses, pydantic
models, Decimal, ...). Starting is all a publisher can do for now: signals to running workflows
are not built yet.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from sagaway import errors, serialization
from sagaway.states import OnConflict
from sagaway.toolkit.outbox._table import Message

if TYPE_CHECKING:
    from sagaway.manager import Manager

WorkflowRef: TypeAlias = Callable[..., Any] | str
Router: TypeAlias = Mapping[str, WorkflowRef] | Callable[[Message], WorkflowRef | None]


class UnroutableMessage(errors.SagawayError):
    """No workflow is routed to the message's topic."""


class WorkflowPublisher:
    """Starts the workflow routed to each message's topic, once per message id.

    Args:
        manager: an open Manager (``async with manager`` or ``manager.connect()``); the workflow
            runs on whichever process's workers pick it up.
        routes: ``{topic: workflow}`` (function or registered name), or a function of the
            message returning the workflow (None: unroutable).
        key: the workflow's idempotency key for a message; default: its ``message_id``. Use a
            business key (``lambda m: f"order-{m.payload['order_id']}"``) when several messages
            may announce the same operation.
        on_conflict: what a start does when the key is in use; default ``ATTACH`` (a redelivery
            joins the existing workflow).
    """

    def __init__(
        self,
        manager: Manager,
        routes: Router,
        *,
        key: Callable[[Message], str] | None = None,
        on_conflict: OnConflict = OnConflict.ATTACH,
    ) -> None:
        self._manager = manager
        self._routes = routes
        self._key = key or (lambda m: m.message_id)
        self._on_conflict = on_conflict
        self.started: list[str] = []
        """Workflow keys started or attached to, in order (for logs and tests)."""

    def route(self, message: Message) -> WorkflowRef:
        """The workflow for ``message``; raises UnroutableMessage."""
        if isinstance(self._routes, Mapping):
            target = self._routes.get(message.topic)
        else:
            target = self._routes(message)
        if target is None:
            raise UnroutableMessage(
                f"no workflow is routed to topic {message.topic!r} (message {message.message_id})"
            )
        return target

    async def publish(self, message: Message) -> None:
        """Start (or attach to) the routed workflow; returns once the start is committed."""
        target = self.route(message)
        defn = self._manager.registry.workflow(target)
        if not isinstance(message.payload, dict):
            raise errors.PayloadError(
                f"message {message.message_id} on {message.topic!r} must carry the arguments of "
                f"workflow {defn.name!r} as a JSON object keyed by parameter name, got "
                f"{type(message.payload).__name__}"
            )
        args, kwargs = defn.codec.decode_args(
            serialization.encode_value(message.payload, f"payload of {message.message_id}")
        )
        handle = await self._manager.workflow(defn.name, *args, **kwargs).execute(
            idempotency_key=self._key(message), on_conflict=self._on_conflict
        )
        self.started.append(handle.key)
