"""A Store that forwards every verb to an Engine Server (``sagaway server``) over gRPC.

The application keeps its workflow code, workers and recovery; the server holds the database
and applies each verb in one transaction there, with the same fencing and group commit as an
embedded store. Wake-ups come back on a server stream (``Watch``), re-opened when it breaks.

Each verb is the RPC of its name, its arguments and result converted by rule (``verbs``):
``remote(Store.verb)`` is all a verb needs here. ``receive_signal`` alone takes more than one
call: the server cannot judge a signal's payload, so the client decides in rounds (``_receive``).

A call the server cannot answer (down, restarting, unreachable) raises ``StoreUnavailable``,
like a database outage: the engine treats it the same way (a workflow resumes from its last
record once the server is back).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from sagaway.store.contract import Store, StoreUnavailable
from sagaway.store.remote import errors as _grpc_errors
from sagaway.store.remote import wire
from sagaway.store.remote.connection import Connection, Stamped
from sagaway.store.remote.errors import ServerRefused
from sagaway.store.remote.verbs import VERBS, Verb

__all__ = ["GrpcStore", "ServerRefused"]

_SIGNAL_ROUNDS = 5
"""ReceiveSignal round trips before giving up on deciding new payloads (each round decides
every payload pending then; more rounds happen only while new signals keep arriving)."""

F = TypeVar("F", bound=Callable[..., Any])


def remote(method: F) -> F:
    """The Store verb ``method``, answered by the server: its RPC, by the rules of ``verbs``."""
    verb = VERBS[method.__name__]

    async def call(self: GrpcStore, *args: Any, **kwargs: Any) -> Any:
        return await self._send(verb, verb.bind(args, kwargs))

    call.__name__ = call.__qualname__ = method.__name__
    call.__doc__ = method.__doc__
    return cast(F, call)


class GrpcStore(Connection):
    """The Store contract, answered by an Engine Server at ``grpc://host:port``."""

    async def _send(self, verb: Verb, values: dict[str, Any]) -> Any:
        """Call ``verb`` with these arguments; its result."""
        request = self._request(verb, values)
        if verb.rpc == "ReceiveSignal":
            return await self._receive(verb, request, values)
        return verb.result(await self._call(verb.rpc, self._stamp(request, values)))

    async def _receive(self, verb: Verb, request: Any, values: dict[str, Any]) -> str | None:
        """``receive_signal``'s rounds: the server cannot judge a payload (only the workflow's
        code knows its type), so it lists the pending ones this client has not decided, and
        the client calls again with its decisions (``accept``: a reason refuses a payload)."""
        accept = values["accept"]
        for _ in range(_SIGNAL_ROUNDS):
            reply = await self._call(verb.rpc, self._stamp(request, values))
            if not reply.undecided:
                return wire.optional(reply, "payload")  # type: ignore[no-any-return]
            for payload in reply.undecided:
                request.decisions[payload] = accept(payload) or ""
        raise StoreUnavailable(
            f"signals {values['receive'].name!r} kept arriving faster than they could be judged; "
            "will try again"
        )

    def _request(self, verb: Verb, values: dict[str, Any]) -> Any:
        request = verb.request(values)
        if verb.rpc == "ForkWorkflow":  # the one request that carries many payloads at once
            largest = self.server_info.max_request_bytes if self.server_info else 0
            _grpc_errors.check_fork_size(request, largest, request.source_run_id)
        return request

    def _stamp(self, request: Any, values: dict[str, Any]) -> Any:
        """``request`` with the call's ``now`` beside it, for a test server that takes the
        client's clock (``HelloReply.trusts_client_clock``); else the request alone."""
        now = values.get("now")
        if now is None or self.server_info is None or not self.server_info.trusts_client_clock:
            return request
        return Stamped(request, now)

    # ------------------------------------------------------------------ workflows

    create_workflow = remote(Store.create_workflow)
    fork_workflow = remote(Store.fork_workflow)
    get_workflow = remote(Store.get_workflow)
    get_run = remote(Store.get_run)
    list_workflows = remote(Store.list_workflows)
    load_steps = remote(Store.load_steps)
    load_steps_many = remote(Store.load_steps_many)
    record_step = remote(Store.record_step)
    finish_workflow = remote(Store.finish_workflow)
    suspend_workflow = remote(Store.suspend_workflow)
    release_workflow = remote(Store.release_workflow)
    renew_leases = remote(Store.renew_leases)
    claim_due = remote(Store.claim_due)
    next_due = remote(Store.next_due)
    end_workflow = remote(Store.end_workflow)
    request_cancel = remote(Store.request_cancel)
    cancel_requests = remote(Store.cancel_requests)
    retry_now = remote(Store.retry_now)
    pause_workflow = remote(Store.pause_workflow)
    paused_runs = remote(Store.paused_runs)
    pause_calls = remote(Store.pause_calls)
    list_paused_calls = remote(Store.list_paused_calls)
    count_by_status = remote(Store.count_by_status)

    # ------------------------------------------------------------------ waits

    send_signal = remote(Store.send_signal)
    wait_workflow = remote(Store.wait_workflow)
    wait_for_child = remote(Store.wait_for_child)
    list_cancel_requests = remote(Store.list_cancel_requests)
    list_signals = remote(Store.list_signals)

    receive_signal = remote(Store.receive_signal)

    # ------------------------------------------------------------------ operators

    purge_ended = remote(Store.purge_ended)
    count_purgeable = remote(Store.count_purgeable)
    acquire_queue_slot = remote(Store.acquire_queue_slot)
    renew_queue_slot = remote(Store.renew_queue_slot)
    release_queue_slot = remote(Store.release_queue_slot)
    leave_queue = remote(Store.leave_queue)
    list_page = remote(Store.list_page)
    list_attempt_errors = remote(Store.list_attempt_errors)
    put_schedule = remote(Store.put_schedule)
    list_schedules = remote(Store.list_schedules)
    set_schedule_paused = remote(Store.set_schedule_paused)
    delete_schedule = remote(Store.delete_schedule)
    fire_schedule = remote(Store.fire_schedule)
    record_audit = remote(Store.record_audit)
    list_audit = remote(Store.list_audit)
    publish = remote(Store.publish)
    read_outputs = remote(Store.read_outputs)
    read_stream = remote(Store.read_stream)
    get_event = remote(Store.get_event)
    list_search_attributes = remote(Store.list_search_attributes)
    start_place = remote(Store.start_place)
    queue_place = remote(Store.queue_place)
