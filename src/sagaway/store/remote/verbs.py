"""The Store's verbs on the wire: each is the Engine RPC of its name (``claim_due`` is
``ClaimDue``), its arguments the fields of that RPC's request, its result that RPC's reply.

Nothing here is written per verb: a verb of the contract (``store.contract.Store``) with an RPC
of the same name in ``engine.proto`` travels by these rules, on the client (``request``,
``result``) and on the server (``arguments``, ``reply``). What is not a plain field:

- ``now`` never travels: the server's clock decides (``server/clock.py``).
- An ``AuditNote`` argument travels as ``wire.audit_note`` writes it; the server reads it with
  ``server/audit.py`` (who acted is the server's to say).
- ``ALIASES``: an argument whose field has another name (``schedule_id`` is ``id``).
- ``CODECS``: arguments that take more than one field (``queues``: ``any_queue`` and
  ``queues``; ``versions``; ended ``statuses``; a ``ListQuery``).
- A record argument with no field of its name is spread over the request's fields
  (``list_audit``'s ``AuditQuery``).
- A ``Callable`` argument (``receive_signal``'s ``accept``) cannot travel: such a verb's client
  and server are written by hand.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from sagaway import states
from sagaway.store.contract import Store
from sagaway.store.records import AttributeFilter, AuditNote, ListQuery
from sagaway.store.remote import wire
from sagaway.v1 import engine_pb2 as pb

_METHODS = pb.DESCRIPTOR.services_by_name["Engine"].methods_by_name
NOT_VERBS = frozenset({"open", "close", "listen", "server_time"})
"""Store methods that are not one call each (the session, the Watch stream)."""
ALIASES = {"schedule_id": "id", "note": "audit"}
"""Argument name -> field name, where they differ."""


class Codec(NamedTuple):
    """An argument carried by several fields: its fields from its value, its value from the
    request."""

    encode: Callable[[Any], Mapping[str, Any]]
    decode: Callable[[Any], Any]


def _queues(queues: Any) -> Mapping[str, Any]:
    return {"any_queue": queues is None, "queues": list(queues or ())}


def _versions(versions: Any) -> Mapping[str, Any]:
    """Unset (what a client older than code versions sends): every version."""
    if versions is None:
        return {}
    named = sorted(v for v in versions if v is not None)
    return {"only_versions": True, "versions": named, "unversioned": None in versions}


def _versions_of(request: Any) -> frozenset[str | None] | None:
    if not request.only_versions:
        return None
    chosen: set[str | None] = set(request.versions)
    if request.unversioned:
        chosen.add(None)
    return frozenset(chosen)


def _statuses(statuses: Any) -> Mapping[str, Any]:
    # Checked here as the embedded stores do: on the wire an empty list means "every ended
    # status", which [] (no status at all) is not.
    return {"statuses": [s.value for s in states.ended_statuses(statuses)]}


def _list_query(query: ListQuery) -> Mapping[str, Any]:
    after = query.after or (None, None)
    return {
        **{f.name: getattr(query, f.name) for f in dataclasses.fields(query)},
        "code_versions": sorted(v for v in query.code_versions if v is not None),
        "unversioned": None in query.code_versions,
        "after": None,
        "after_created_at": after[0],
        "after_run_id": after[1],
    }


def _list_query_of(request: Any) -> ListQuery:
    has_after = request.HasField("after_created_at"), request.HasField("after_run_id")
    if has_after[0] != has_after[1]:
        raise ValueError("after_created_at and after_run_id go together")
    return ListQuery(
        limit=request.limit,
        statuses=frozenset(wire.workflow_status(s) for s in request.statuses),
        name=wire.optional(request, "name"),
        key_prefix=request.key_prefix,
        since=wire.optional(request, "since"),
        until=wire.optional(request, "until"),
        after=(request.after_created_at, request.after_run_id) if has_after[0] else None,
        code_versions=frozenset([*request.code_versions, *([None] if request.unversioned else [])]),
        attributes=tuple(wire.from_message(AttributeFilter, m) for m in request.attributes),
        ordering_key=wire.optional(request, "ordering_key"),
        debounce_key=wire.optional(request, "debounce_key"),
        priority=wire.optional(request, "priority"),
        fairness_key=wire.optional(request, "fairness_key"),
    )


CODECS: Mapping[str | type, Codec] = {
    "queues": Codec(_queues, lambda r: None if r.any_queue else list(r.queues)),
    "versions": Codec(_versions, _versions_of),
    "statuses": Codec(_statuses, lambda r: [wire.workflow_status(s) for s in r.statuses] or None),
    ListQuery: Codec(_list_query, _list_query_of),
}
"""By argument name, or by type for a record spread over the request."""


@dataclasses.dataclass(frozen=True, slots=True)
class Param:
    """One argument of a verb: how it travels (``kind``) and in which field."""

    name: str
    type: Any
    kind: str
    """``field``, ``codec``, ``spread`` (a record over the request's fields), ``audit``,
    ``now`` (never sent: the server's clock) or ``local`` (a callable: never sent)."""
    field: str
    default: Any
    positional: bool
    """Passed by position (a verb's first argument: implementations name it as they like)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Verb:
    """A Store verb as its RPC: arguments to the request, the reply to its result."""

    method: str
    rpc: str
    params: tuple[Param, ...]
    returns: Any
    request_class: Any
    reply_class: Any

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The verb's arguments by name, defaults filled in."""
        values = {
            p.name: p.default for p in self.params if p.default is not inspect.Parameter.empty
        }
        values.update(zip((p.name for p in self.params), args, strict=False))
        values.update(kwargs)
        if len(values) != len(self.params):
            missing = [p.name for p in self.params if p.name not in values]
            raise TypeError(f"{self.method}() arguments missing or unknown: {missing or values}")
        return values

    def request(self, values: Mapping[str, Any]) -> Any:
        """The request message of a call with these arguments (client side)."""
        request = self.request_class()
        for param in self.params:
            value = values[param.name]
            if param.kind in ("field", "audit"):
                wire.put(request, param.field, value)
            elif param.kind == "codec":
                for name, item in _codec(param).encode(value).items():
                    wire.put(request, name, item)
            elif param.kind == "spread":
                wire.fill(request, value)
        return request

    def arguments(self, request: Any) -> dict[str, Any]:
        """The arguments a request carries (server side), except ``now`` (None here), audit
        notes and callables: those are the server's to add."""
        values: dict[str, Any] = {}
        for param in self.params:
            if param.kind == "field":
                values[param.name] = wire.value_of(param.type, request, param.field)
            elif param.kind == "codec":
                values[param.name] = _codec(param).decode(request)
            elif param.kind == "spread":
                values[param.name] = wire.from_message(param.type, request)
            elif param.kind == "now":
                values["now"] = None  # the server's clock sets it
        return values

    def call(self, store: Any, values: dict[str, Any]) -> Any:
        """The store's coroutine of this verb with these arguments."""
        args = [values.pop(p.name) for p in self.params if p.positional]
        return getattr(store, self.method)(*args, **values)

    def reply(self, result: Any) -> Any:
        """The reply message of a result (server side)."""
        return wire.fill(self.reply_class(), result)

    def result(self, reply: Any) -> Any:
        """The result a reply carries (client side)."""
        return wire.read(self.returns, reply)


def _codec(param: Param) -> Codec:
    return CODECS.get(param.name) or CODECS[param.type]


def rpc_name(method: str) -> str:
    """``claim_due`` -> ``ClaimDue``."""
    return "".join(part.title() for part in method.split("_"))


def _param(method: str, p: inspect.Parameter, tp: Any, request: Any) -> Param:
    field = ALIASES.get(p.name, p.name)
    inner = wire.optional_of(tp) or tp
    if p.name == "now":
        kind = "now"
    elif typing.get_origin(inner) is Callable or inner is Callable:
        kind = "local"
    elif inner is AuditNote:
        kind = "audit"
    elif p.name in CODECS or inner in CODECS:
        kind = "codec"
    elif field in request.DESCRIPTOR.fields_by_name:
        kind = "field"
    elif dataclasses.is_dataclass(inner):
        kind = "spread"
    else:
        raise TypeError(f"Store.{method}: no field {field!r} in {request.DESCRIPTOR.name}")
    positional = p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    return Param(p.name, tp, kind, field, p.default, positional)


def _verb(method: str) -> Verb:
    rpc = _METHODS[rpc_name(method)]
    function = getattr(Store, method)
    hints = typing.get_type_hints(function)
    request_class = getattr(pb, rpc.input_type.name)
    params = tuple(
        _param(method, p, hints[p.name], request_class)
        for p in list(inspect.signature(function).parameters.values())[1:]
    )
    return Verb(
        method,
        rpc.name,
        params,
        hints["return"],
        request_class,
        getattr(pb, rpc.output_type.name),
    )


def _methods() -> list[str]:
    return sorted(
        name
        for name, value in inspect.getmembers(Store, inspect.iscoroutinefunction)
        if not name.startswith("_") and name not in NOT_VERBS
    )


VERBS: Mapping[str, Verb] = {method: _verb(method) for method in _methods()}
"""Every verb of the Store contract, by method name."""
BY_RPC: Mapping[str, Verb] = {verb.rpc: verb for verb in VERBS.values()}
