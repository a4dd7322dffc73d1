"""The Engine Server client's connection: the channel (TLS, keepalive, reconnect backoff), the
Hello handshake, unary calls batched into one ``Batch`` call when several are in flight, the
server's errors as the store's, and the ``Watch`` stream of notices (re-opened when it breaks).
``GrpcStore`` (``client``) adds the verbs."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from typing import Any

try:
    import grpc
    import grpc.aio
except ImportError as exc:  # an optional extra
    raise ImportError(
        "the Engine Server client needs grpcio: pip install 'sagaway[server]'"
    ) from exc

from sagaway import errors
from sagaway.store import notices
from sagaway.store.contract import StoreUnavailable
from sagaway.store.remote import errors as _grpc_errors
from sagaway.store.remote import wire
from sagaway.store.remote.batching import Batcher, reply_class
from sagaway.store.remote.target import (
    CHANNEL_KEEPALIVE_MS,
    CONNECT_TIMEOUT,
    Target,
    handshake_hint,
    parse_target,
)
from sagaway.v1 import engine_pb2 as pb
from sagaway.v1 import engine_pb2_grpc as pb_grpc

logger = logging.getLogger(__name__)

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    # Find a dead server within seconds, and reconnect soon after it is back.
    ("grpc.keepalive_time_ms", CHANNEL_KEEPALIVE_MS),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
]

UNBATCHABLE = frozenset({"Hello", "Watch", "Batch", "AwaitWorkflow", "StartWorkflow"})
BATCH_BYTES = 1024 * 1024
"""Largest batch of requests in one message (a request over it goes alone)."""


HELLO_ATTEMPTS = 3
"""Handshakes tried with a server that connects but answers slowly (``CONNECT_TIMEOUT`` each)."""


_SLOW_SIGNS = (
    "timed out before receiving SETTINGS",
    "Deadline Exceeded",
    "tcp handshaker shutdown",  # the TCP connect attempt outlived the call's deadline
)


def _slow(details: str) -> bool:
    """Whether a failed call timed out on a server that exists (not refused, not TLS)."""
    return any(sign in details for sign in _SLOW_SIGNS)


CLIENT_NOW = "sagaway-client-now"
"""The metadata with a call's time, for a server that trusts its clients' clocks (tests)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Stamped:
    """A request and the client's time of its call, for a test server that acts at its
    clients' times (``HelloReply.trusts_client_clock``); sent as the metadata ``CLIENT_NOW``."""

    message: Any
    now: float

    def ByteSize(self) -> int:
        return int(self.message.ByteSize())

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((CLIENT_NOW, repr(self.now)),)


def _message(request: Any) -> tuple[Any, tuple[tuple[str, str], ...]]:
    """The message of a request, and the call metadata it adds."""
    if isinstance(request, Stamped):
        return request.message, request.metadata()
    return request, ()


def _batch_call(method: str, request: Any) -> pb.BatchCall:
    message, extra = _message(request)
    metadata = [pb.MetadataEntry(key=k, value=v.encode()) for k, v in extra]
    return pb.BatchCall(method=method, request=message.SerializeToString(), metadata=metadata)


def _channel(target: Target) -> grpc.aio.Channel:
    options: list[tuple[str, int | str]] = list(CHANNEL_OPTIONS)
    if target.server_name:
        options.append(("grpc.ssl_target_name_override", target.server_name))
    if not target.tls:
        return grpc.aio.insecure_channel(target.address, options=options)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=target.ca, private_key=target.key, certificate_chain=target.cert
    )
    return grpc.aio.secure_channel(target.address, credentials, options=options)


class Connection:
    """The channel to an Engine Server: ``open`` (the Hello handshake), ``close``, calls (alone
    or batched), errors as the store's, and the ``Watch`` stream of notices."""

    def __init__(self, url: str, *, create: bool = True, token: str | None = None) -> None:
        self.url = url
        self._target = parse_target(url, token)
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {self._target.token}"),) if self._target.token else ()
        )
        self._channel: grpc.aio.Channel | None = None
        self._stub: pb_grpc.EngineStub | None = None
        self._watch: asyncio.Task[None] | None = None
        self._batcher: Batcher | None = None
        self.server_info: pb.HelloReply | None = None
        """What the server said of itself when the store opened."""
        self.max_lease: float | None = None
        """The longest lease the server grants (seconds), None if it did not say."""

    # ------------------------------------------------------------------ plumbing

    async def open(self) -> None:
        if self._channel is not None:
            return
        self._channel = _channel(self._target)
        self._stub = pb_grpc.EngineStub(self._channel)
        hello = pb.HelloRequest(protocol_version=wire.PROTOCOL_VERSION, client="sagaway-python")
        try:
            reply = await self._hello(hello)
        except StoreUnavailable as exc:
            await self.close()
            hint = handshake_hint(self._target, str(exc))
            if hint is None:
                raise
            raise StoreUnavailable(f"{hint} [{exc}]") from None
        except BaseException:
            await self.close()
            raise
        self.server_info = reply
        self.max_lease = reply.max_lease if reply.HasField("max_lease") else None
        if reply.max_request_bytes > 0:  # a server that takes Batch calls
            limit = min(reply.max_request_bytes // 2, BATCH_BYTES)
            self._batcher = Batcher(self._unary, self._many, max_bytes=limit)

    async def _hello(self, hello: pb.HelloRequest) -> Any:
        """The handshake. A server that accepted the connection but did not answer in time (busy,
        or starting) is asked again on a new connection, ``HELLO_ATTEMPTS`` times in all; a
        refused connection or any other error is not (a wrong address is said at once)."""
        for attempt in range(1, HELLO_ATTEMPTS + 1):
            try:
                return await self._call("Hello", hello, timeout=CONNECT_TIMEOUT)
            except StoreUnavailable as exc:
                if attempt == HELLO_ATTEMPTS or not _slow(str(exc)):
                    raise
                logger.info("the Engine Server at %s is slow to answer; asking again", self.url)
                # The channel now waits out its reconnection backoff: start a fresh one.
                assert self._channel is not None
                await self._channel.close()
                self._channel = _channel(self._target)
                self._stub = pb_grpc.EngineStub(self._channel)
        raise AssertionError("unreachable")  # pragma: no cover

    async def close(self) -> None:
        if self._batcher is not None:
            self._batcher.close()
            self._batcher = None
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        if self._channel is not None:
            channel, self._channel, self._stub = self._channel, None, None
            await channel.close()

    async def _call(self, method: str, request: Any, *, timeout: float | None = None) -> Any:
        # The batcher lives only while the store is open; closed, _unary says so.
        if self._batcher is not None and timeout is None and method not in UNBATCHABLE:
            return await self._batcher.call(method, request)
        return await self._unary(method, request, timeout)

    async def _unary(self, method: str, request: Any, timeout: float | None = None) -> Any:
        if self._stub is None:
            raise errors.ManagerStateError("the Engine Server connection is not open")
        call = getattr(self._stub, method)
        message, extra = _message(request)
        try:
            return await call(
                message,
                timeout=timeout or self._target.call_timeout,
                metadata=self._metadata + extra,
            )
        except grpc.aio.AioRpcError as exc:
            trailing = dict(exc.trailing_metadata() or ())
            raise self._error(exc.code(), exc.details() or "", trailing) from None

    async def _many(self, calls: list[tuple[str, Any]]) -> list[Any]:
        """Replies (or exceptions) of several calls, sent in one Batch RPC."""
        batch = pb.BatchRequest(calls=[_batch_call(m, r) for m, r in calls])
        reply = await self._unary("Batch", batch)
        outcomes: list[Any] = []
        for (method, _), result in zip(calls, reply.results, strict=True):
            if result.code == 0:
                outcomes.append(reply_class(method).FromString(result.reply))
                continue
            trailing: dict[str, Any] = {
                e.key: e.value if e.key.endswith("-bin") else e.value.decode("utf-8", "replace")
                for e in result.trailing
            }
            code = _grpc_errors.CODES.get(result.code, grpc.StatusCode.UNKNOWN)
            outcomes.append(self._error(code, result.message, trailing))
        return outcomes

    def _error(self, code: grpc.StatusCode, details: str, trailing: dict[str, Any]) -> Exception:
        return _grpc_errors.error_of(code, details, trailing, url=self.url, target=self._target)

    # ------------------------------------------------------------------ notifications

    async def server_time(self) -> float | None:
        reply = await self._call("ServerTime", pb.ServerTimeRequest())
        return float(reply.now)

    async def listen(
        self, callback: notices.Callback, *, owner: str | None = None, ends: bool = True
    ) -> None:
        # The server's stream brings every notice: there is nothing to address.
        if self._watch is None:
            self._watch = asyncio.create_task(self._watch_loop(callback), name="sagaway-watch")

    async def _watch_loop(self, callback: notices.Callback) -> None:
        """Keep a Watch stream open; say ``Deaf()`` when it breaks (everyone looks for
        themselves until the server's ``Listening()`` on the re-opened stream)."""
        delay, listening = 0.05, False
        while True:
            stub = self._stub
            if stub is None:
                return
            try:
                stream: Any = stub.Watch(pb.WatchRequest(), metadata=self._metadata)
                async for message in stream:
                    notice = notices.decode(message.payload)
                    if isinstance(notice, notices.Listening):
                        listening, delay = True, 0.05
                    if notice is not None:
                        callback(notice)
            except grpc.aio.AioRpcError as exc:
                logger.debug("watch stream ended: %s", exc.code().name)
            if listening:
                listening = False
                callback(notices.Deaf())
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
