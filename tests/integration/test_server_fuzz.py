"""Malformed and oversized requests to every RPC of the Engine service, made by hypothesis.

Every call must end with a status code before its deadline, never INTERNAL (nor UNKNOWN) for
bad input and never with a stack trace in its details; malformed requests end
INVALID_ARGUMENT, oversized ones RESOURCE_EXHAUSTED; and the server stays up: at the end its
health check answers and a workflow runs to completion through it."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import DecodeError, Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagaway.v1 import engine_pb2 as pb
from tests.integration.server_support import ServerProcess, build_app

pytestmark = [pytest.mark.grpc, pytest.mark.slow, pytest.mark.long]

PAYLOAD_LIMIT = 1024
"""The server's payload limit here (its smallest): oversized messages stay cheap to send."""
MESSAGE_LIMIT = 2 * PAYLOAD_LIMIT + 64 * 1024
"""The largest message the server takes (see sagaway.server.app)."""
DEADLINE = 5.0
METHODS: list[MethodDescriptor] = list(pb.DESCRIPTOR.services_by_name["Engine"].methods)
NEVER = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}
PAYLOAD_FIELDS = {"args", "result", "error", "payload"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    folder = tmp_path_factory.mktemp("fuzz")
    process = ServerProcess(
        f"sqlite:///{folder / 'db.sqlite'}", "--payload-limit", str(PAYLOAD_LIMIT)
    )
    try:
        yield process, process.wait_ready()
    finally:
        process.stop()


@pytest.fixture(scope="module")
def channel(server: tuple[ServerProcess, str]) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server[1], options=[("grpc.max_send_message_length", -1)]) as opened:
        yield opened


# ----------------------------------------------------------------------------- strategies

_TEXT = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", "PENDING", "COMPLETED", "BOGUS", "completed", "{}", "[]", "not json"]),
    st.text(max_size=10).map(lambda t: f"{t}\x00{t}"),
    st.integers(PAYLOAD_LIMIT + 1, 4 * PAYLOAD_LIMIT).map(lambda n: "x" * n),
)
_DOUBLE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, -1.0, 0.0, 1e300, 1.7e9]),
)
_SCALARS: dict[int, st.SearchStrategy[Any]] = {
    FieldDescriptor.TYPE_STRING: _TEXT,
    FieldDescriptor.TYPE_DOUBLE: _DOUBLE,
    FieldDescriptor.TYPE_INT32: st.integers(-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: st.integers(-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_BOOL: st.booleans(),
    FieldDescriptor.TYPE_BYTES: st.binary(max_size=64),
}


def _message(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """Field values for ``descriptor`` (a dict: field name -> value), each field maybe absent."""
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for field in descriptor.fields:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key, value = (field.message_type.fields_by_name[n] for n in ("key", "value"))
            value_strategy = _value(value, depth + 1)
            fields[field.name] = st.dictionaries(_value(key, depth + 1), value_strategy, max_size=3)
        elif field.is_repeated:
            fields[field.name] = st.lists(_value(field, depth + 1), max_size=3)
        else:
            fields[field.name] = _value(field, depth + 1)
    return st.fixed_dictionaries({}, optional=fields)


def _value(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if depth > 3 or field.message_type is None:
            return st.just({})
        return _message(field.message_type, depth)
    return _SCALARS[field.type]


def _build(cls: type[Message], values: dict[str, Any]) -> Message:
    message = cls()
    for name, value in values.items():
        field = message.DESCRIPTOR.fields_by_name[name]
        target = getattr(message, name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            for key, item in value.items():
                if value_field.message_type is not None:
                    target[key].CopyFrom(_build(getattr(pb, value_field.message_type.name), item))
                else:
                    target[key] = item
        elif field.is_repeated:
            if field.message_type is not None:
                for item in value:
                    target.add().CopyFrom(_build(getattr(pb, field.message_type.name), item))
            else:
                target.extend(value)
        elif field.message_type is not None:
            target.CopyFrom(_build(getattr(pb, field.message_type.name), value))
        else:
            setattr(message, name, value)
    return message


def _faults(message: Message) -> tuple[bool, bool]:
    """(malformed, over the payload limit): what the server must refuse in ``message``."""
    malformed = oversized = False
    for field, value in message.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            k_field, v_field = (field.message_type.fields_by_name[n] for n in ("key", "value"))
            items = [(k_field, k) for k in value] + [(v_field, v) for v in value.values()]
        elif field.is_repeated:
            items = [(field, v) for v in value]
        else:
            items = [(field, value)]
        for sub_field, item in items:
            if isinstance(item, Message):
                bad, big = _faults(item)
            elif isinstance(item, str):
                bad = "\x00" in item
                big = sub_field.name in PAYLOAD_FIELDS and len(item) > PAYLOAD_LIMIT
            elif isinstance(item, float):
                bad, big = not math.isfinite(item), False
            elif isinstance(item, int) and not isinstance(item, bool):
                bad, big = item < 0, False
            else:
                bad = big = False
            malformed, oversized = malformed or bad, oversized or big
    return malformed, oversized


# ----------------------------------------------------------------------------- calls


def _path(method: MethodDescriptor) -> str:
    return f"/sagaway.v1.Engine/{method.name}"


def _call(channel: grpc.Channel, method: MethodDescriptor, body: bytes) -> grpc.StatusCode:
    """Send ``body`` as the raw request of ``method``; its status code (OK if it answered)."""
    deadline = 1.0 if method.server_streaming else DEADLINE
    started = time.monotonic()
    try:
        if method.server_streaming:
            streaming: Any = channel.unary_stream(_path(method))
            stream: Any = streaming(body, timeout=deadline)
            for _ in stream:
                pass
        else:
            unary: Any = channel.unary_unary(_path(method))
            unary(body, timeout=deadline)
        code = grpc.StatusCode.OK
    except grpc.RpcError as exc:
        code = exc.code()
        details = exc.details() or ""
        assert "Traceback" not in details and 'File "' not in details, details
    assert time.monotonic() - started < deadline + 2, f"{method.name} outlived its deadline"
    assert code not in NEVER, f"{method.name}: {code.name}"
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        # Only the calls that wait on purpose may run into their deadline.
        assert method.name in ("Watch", "AwaitWorkflow", "ReceiveSignal"), method.name
    return code


def _every_method(test: Callable[..., None]) -> Callable[..., None]:
    mark = pytest.mark.parametrize("method", METHODS, ids=[m.name for m in METHODS])
    decorated: Callable[..., None] = mark(test)
    return decorated


@_every_method
@settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_random_field_values(
    channel: grpc.Channel, method: MethodDescriptor, data: st.DataObject
) -> None:
    cls: type[Message] = getattr(pb, method.input_type.name)
    request = _build(cls, data.draw(_message(method.input_type)))
    malformed, oversized = _faults(request)
    code = _call(channel, method, request.SerializeToString())
    if malformed or oversized:
        expected = set()
        if malformed:
            expected.add(grpc.StatusCode.INVALID_ARGUMENT)
        if oversized:
            expected.add(grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert code in expected, f"{method.name}({request}) ended {code.name}"


@_every_method
@settings(
    max_examples=8,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=st.binary(max_size=64))
def test_random_bytes_as_request(
    channel: grpc.Channel, method: MethodDescriptor, body: bytes
) -> None:
    cls: type[Message] = getattr(pb, method.input_type.name)
    try:
        parsed: Message | None = cls.FromString(body)
    except DecodeError:
        parsed = None
    code = _call(channel, method, body)
    if parsed is None:
        assert code is grpc.StatusCode.INVALID_ARGUMENT, f"{method.name}: {code.name}"


@_every_method
def test_message_over_the_size_limit(channel: grpc.Channel, method: MethodDescriptor) -> None:
    # Field 1 as length-delimited bytes; over the limit, the server never reads it.
    size = MESSAGE_LIMIT + 1024
    body = b"\x0a" + _varint(size) + b"a" * size
    assert _call(channel, method, body) is grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.mark.parametrize(
    "method, request_",
    [
        ("ListWorkflows", pb.ListWorkflowsRequest(status="BOGUS", limit=1)),
        ("FinishWorkflow", pb.FinishWorkflowRequest(run_id="r", token="t", status="BOGUS")),
        ("FinishWorkflow", pb.FinishWorkflowRequest(run_id="r", token="t", status="completed")),
        ("EndWorkflow", pb.EndWorkflowRequest(run_id="r", status="RUNNING")),
        ("PurgeEnded", pb.PurgeEndedRequest(before=1.0, statuses=["BOGUS"], limit=1)),
        ("CountPurgeable", pb.CountPurgeableRequest(before=1.0, statuses=["PENDING "])),
        ("ListPage", pb.ListPageRequest(limit=1, statuses=["NOPE"])),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_unknown_status_is_invalid_argument(
    channel: grpc.Channel, method: str, request_: Message
) -> None:
    found = pb.DESCRIPTOR.services_by_name["Engine"].methods_by_name[method]
    assert _call(channel, found, request_.SerializeToString()) is grpc.StatusCode.INVALID_ARGUMENT


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


async def test_server_survives(server: tuple[ServerProcess, str], channel: grpc.Channel) -> None:
    """Last in the module: after all of the above, the server is alive and works."""
    process, address = server
    assert process.proc.poll() is None
    health: Any = health_pb2_grpc.HealthStub(channel)
    reply = health.Check(health_pb2.HealthCheckRequest(service="sagaway.v1.Engine"), timeout=5)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    app = build_app(f"grpc://{address}")
    async with app:
        result = await app.workflow("greet", "fuzz").execute_get(timeout=30)
    assert result == {"greeting": "HELLO FUZZ", "name": "fuzz"}
    assert "Traceback" not in "".join(process.stderr_lines)
