"""The service sees who calls: ``current_principal()`` inside the Engine service's methods is
the caller the door admitted, in a plain call, in each call of a Batch, in a stream, and for
concurrent calls of different principals. An Engine Server run in this process (``serve``), its
service's methods wrapped to record what they see."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from sagaway import credentials
from sagaway.principals import ALL_ROLES, Principal, Role, current_principal
from sagaway.server.app import ServerConfig, serve
from sagaway.server.service import EngineService
from sagaway.v1 import engine_pb2 as pb
from sagaway.v1 import engine_pb2_grpc as pb_grpc

pytestmark = pytest.mark.grpc
READER = Principal("reader", frozenset({Role.READ}))
ADMIN = Principal("admin", frozenset({Role.ADMIN}))


def _spy(
    monkeypatch: pytest.MonkeyPatch, name: str, seen: list[tuple[str, Principal | None]]
) -> None:
    """Wrap ``EngineService.<name>`` (and what a Batch calls, its ``__wrapped__``) to record
    the current principal when it runs."""
    original: Any = getattr(EngineService, name)

    async def spy(self: EngineService, request: Any, context: Any) -> Any:
        seen.append((name, current_principal()))
        return await original(self, request, context)

    async def spy_unwrapped(self: EngineService, request: Any, context: Any) -> Any:
        seen.append((f"{name} in batch", current_principal()))
        return await original.__wrapped__(self, request, context)

    spy.__wrapped__ = spy_unwrapped  # type: ignore[attr-defined]
    monkeypatch.setattr(EngineService, name, spy)


async def _served(tmp_path: Path, **config: Any) -> tuple[str, asyncio.Event, asyncio.Task[None]]:
    stop = asyncio.Event()
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    server_config = ServerConfig(
        url=f"sqlite:///{tmp_path / 'db.sqlite'}", listen="127.0.0.1:0", **config
    )
    task = asyncio.create_task(serve(server_config, stop, ready=ready.set_result))
    return await asyncio.wait_for(ready, 30), stop, task


def _tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.toml"
    path.write_text(
        credentials.toml_entry("reader", [Role.READ], credentials.digest("t-reader"))
        + credentials.toml_entry("admin", [Role.ADMIN], credentials.digest("t-admin"))
    )
    return path


def _as(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


async def test_the_principal_reaches_the_service_in_calls_batches_and_streams(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, Principal | None]] = []
    for name in ("GetWorkflow", "CountByStatus"):
        _spy(monkeypatch, name, seen)
    watched: list[Principal | None] = []
    original_watch: Callable[..., AsyncIterator[pb.Notice]] = EngineService.Watch

    async def watch(self: EngineService, request: Any, context: Any) -> AsyncIterator[pb.Notice]:
        watched.append(current_principal())
        async for notice in original_watch(self, request, context):
            yield notice

    monkeypatch.setattr(EngineService, "Watch", watch)
    address, stop, task = await _served(tmp_path, tokens_file=_tokens(tmp_path))
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            stub: Any = pb_grpc.EngineStub(channel)
            await stub.GetWorkflow(pb.KeyRequest(key="k"), metadata=_as("t-reader"), timeout=10)
            await stub.GetWorkflow(pb.KeyRequest(key="k"), metadata=_as("t-admin"), timeout=10)
            batch = pb.BatchRequest(
                calls=[
                    pb.BatchCall(method="GetWorkflow", request=b""),
                    pb.BatchCall(method="CountByStatus", request=b""),
                ]
            )
            reply = await stub.Batch(batch, metadata=_as("t-reader"), timeout=10)
            assert [r.code for r in reply.results] == [0, 0]
            stream = stub.Watch(pb.WatchRequest(), metadata=_as("t-admin"), timeout=10)
            async for _ in stream:
                break
            stream.cancel()
    finally:
        stop.set()
        await task
    assert seen[:2] == [("GetWorkflow", READER), ("GetWorkflow", ADMIN)]
    assert sorted(seen[2:], key=lambda s: s[0]) == [
        ("CountByStatus in batch", READER),
        ("GetWorkflow in batch", READER),
    ]
    assert watched == [ADMIN]
    assert current_principal() is None  # nothing leaked into the test's own context


async def test_concurrent_calls_each_see_their_own_principal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader's call waits inside the service while the admin's runs: each sees its own
    caller before and after the wait (nothing is shared between calls)."""
    inside = asyncio.Event()
    release = asyncio.Event()
    seen: list[tuple[str, Principal | None]] = []
    original: Any = EngineService.GetWorkflow

    async def held(self: EngineService, request: Any, context: Any) -> Any:
        before = current_principal()
        if request.key == "hold":
            inside.set()
            await release.wait()
        seen.append((request.key, before))
        seen.append((request.key, current_principal()))
        return await original(self, request, context)

    monkeypatch.setattr(EngineService, "GetWorkflow", held)
    address, stop, task = await _served(tmp_path, tokens_file=_tokens(tmp_path))
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            stub: Any = pb_grpc.EngineStub(channel)
            first = asyncio.ensure_future(
                stub.GetWorkflow(pb.KeyRequest(key="hold"), metadata=_as("t-reader"), timeout=10)
            )
            await asyncio.wait_for(inside.wait(), 10)
            await stub.GetWorkflow(pb.KeyRequest(key="go"), metadata=_as("t-admin"), timeout=10)
            release.set()
            await first
    finally:
        stop.set()
        await task
    assert seen == [("go", ADMIN), ("go", ADMIN), ("hold", READER), ("hold", READER)]


async def test_a_server_without_tokens_serves_anonymous_with_every_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, Principal | None]] = []
    _spy(monkeypatch, "GetWorkflow", seen)
    address, stop, task = await _served(tmp_path)
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            stub: Any = pb_grpc.EngineStub(channel)
            await stub.GetWorkflow(pb.KeyRequest(key="k"), timeout=10)
            # A token it was never given changes nothing: it asks for none.
            await stub.GetWorkflow(pb.KeyRequest(key="k"), metadata=_as("x"), timeout=10)
    finally:
        stop.set()
        await task
    assert seen == [("GetWorkflow", Principal("anonymous", ALL_ROLES))] * 2


async def test_the_single_token_is_default_beside_the_tokens_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, Principal | None]] = []
    _spy(monkeypatch, "GetWorkflow", seen)
    address, stop, task = await _served(tmp_path, tokens_file=_tokens(tmp_path), token="one")
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            stub: Any = pb_grpc.EngineStub(channel)
            for token in ("one", "t-reader"):
                await stub.GetWorkflow(pb.KeyRequest(key="k"), metadata=_as(token), timeout=10)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.PurgeEnded(pb.PurgeEndedRequest(), metadata=_as("t-reader"))
            assert caught.value.code() is grpc.StatusCode.PERMISSION_DENIED
            trailing = dict(caught.value.trailing_metadata() or ())
            assert trailing["sagaway-error"] == "PermissionDenied"
    finally:
        stop.set()
        await task
    assert seen == [("GetWorkflow", Principal("default", ALL_ROLES)), ("GetWorkflow", READER)]
