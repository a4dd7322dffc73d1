"""The Engine Server's protocol contract: status codes and the client errors they become, a
client built from the .proto alone, generated code in step with the .proto, graceful stop."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import grpc.aio
import pytest

from sagaway import errors
from sagaway.states import WorkflowStatus
from sagaway.store import StoreUnavailable, open_store
from sagaway.store.grpc import GrpcStore, ServerRefused
from sagaway.v1 import engine_pb2 as pb
from sagaway.v1 import engine_pb2_grpc as pb_grpc
from tests.grpc_server import ServerProcess as Served
from tests.integration.server_support import PYTHON, ROOT, ServerProcess, build_app
from tests.store_helpers import T0, running, step

pytestmark = pytest.mark.grpc


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ``sagaway server`` process (its own interpreter: its protocol version is its own)."""
    folder = tmp_path_factory.mktemp("protocol")
    process = ServerProcess(f"sqlite:///{folder / 'db.sqlite'}")
    try:
        yield process.wait_ready()
    finally:
        process.stop()


async def _raw_error(address: str, method: str, request: object) -> grpc.aio.AioRpcError:
    async with grpc.aio.insecure_channel(address) as channel:
        call = getattr(pb_grpc.EngineStub(channel), method)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(request, timeout=10)
    return caught.value


# ----------------------------------------------------------------------------- error mapping


async def test_fenced_call_with_wrong_token_raises_lease_lost(tmp_path: Path) -> None:
    with Served(f"sqlite:///{tmp_path / 'db.sqlite'}") as served:
        store = GrpcStore(served.url)
        await store.open()
        try:
            held = await running(store, "fenced")
            record = await store.get_workflow("fenced")
            assert record is not None
            with pytest.raises(errors.LeaseLost) as caught:
                await store.record_step(step(record.run_id, "1", T0), token="not-the-lease")
            assert caught.value.run_id == record.run_id
            assert str(caught.value) == f"lost ownership of run {record.run_id}"
            # The owner's token still writes.
            await store.record_step(step(record.run_id, "1", T0), token=held.token)
        finally:
            await store.close()
        raw = await _raw_error(
            served.address,
            "FinishWorkflow",
            pb.FinishWorkflowRequest(run_id=record.run_id, token="nope", status="COMPLETED"),
        )
    assert raw.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert (raw.details() or "").startswith("lease lost")
    trailing = dict(raw.trailing_metadata() or ())
    assert trailing["sagaway-error"] == "LeaseLost"
    assert trailing["sagaway-run-id-bin"] == record.run_id.encode()


async def test_lease_lost_on_a_run_id_no_header_can_carry(tmp_path: Path) -> None:
    """The run id comes back as sent, even with control and non-ASCII characters."""
    odd = "run\x1f\u00e9\U0001f600\n"
    with Served(f"sqlite:///{tmp_path / 'db.sqlite'}") as served:
        store = GrpcStore(served.url)
        await store.open()
        try:
            with pytest.raises(errors.LeaseLost) as caught:
                await store.record_step(step(odd, "1", T0), token="t")
        finally:
            await store.close()
    assert caught.value.run_id == odd


async def test_other_protocol_version_is_refused(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = await _raw_error(server, "Hello", pb.HelloRequest(protocol_version=99, client="test"))
    assert raw.code() is grpc.StatusCode.FAILED_PRECONDITION
    details = raw.details() or ""
    assert "99" in details and "speaks 1" in details, details
    # The SDK speaking another version is told so, as ServerRefused.
    from sagaway.store.remote import wire as _wire

    monkeypatch.setattr(_wire, "PROTOCOL_VERSION", 99)
    with pytest.raises(ServerRefused, match="99"):
        async with build_app(f"grpc://{server}").connect():
            pass


async def test_unreachable_server_fails_fast_naming_it() -> None:
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match=re.escape("127.0.0.1:1")):
        async with build_app("grpc://127.0.0.1:1").connect():
            pass
    assert time.monotonic() - started < 8


async def test_await_unknown_key_is_not_found(server: str) -> None:
    raw = await _raw_error(
        server, "AwaitWorkflow", pb.AwaitWorkflowRequest(key="never-started", timeout=1)
    )
    assert raw.code() is grpc.StatusCode.NOT_FOUND


async def test_start_same_key_other_args_is_already_exists(server: str) -> None:
    async with grpc.aio.insecure_channel(server) as channel:
        stub = pb_grpc.EngineStub(channel)
        first = pb.StartWorkflowRequest(name="greet", key="same-key", args='{"name": "a"}')
        reply = await stub.StartWorkflow(first, timeout=10)
        assert reply.created and reply.record.status == "PENDING"
        again = await stub.StartWorkflow(
            pb.StartWorkflowRequest(name="greet", key="same-key", args='{ "name":"a" }'),
            timeout=10,
        )
        assert not again.created and again.record.run_id == reply.record.run_id
    raw = await _raw_error(
        server,
        "StartWorkflow",
        pb.StartWorkflowRequest(name="greet", key="same-key", args='{"name": "b"}'),
    )
    assert raw.code() is grpc.StatusCode.ALREADY_EXISTS
    raw = await _raw_error(
        server, "StartWorkflow", pb.StartWorkflowRequest(name="other", key="same-key", args="{}")
    )
    assert raw.code() is grpc.StatusCode.ALREADY_EXISTS


async def test_start_says_which_code_version_should_run_it(server: str) -> None:
    async with grpc.aio.insecure_channel(server) as channel:
        stub = pb_grpc.EngineStub(channel)
        reply = await stub.StartWorkflow(
            pb.StartWorkflowRequest(
                name="greet", key="versioned-1", args='{"name": "a"}', code_version="2026.12.1"
            ),
            timeout=10,
        )
        assert reply.created and reply.record.code_version == "2026.12.1"
        plain = await stub.StartWorkflow(
            pb.StartWorkflowRequest(name="greet", key="versioned-2", args='{"name": "a"}'),
            timeout=10,
        )
        assert not plain.record.HasField("code_version")
    for bad in ("", "a,b", "x" * 101, "unversioned"):
        raw = await _raw_error(
            server,
            "StartWorkflow",
            pb.StartWorkflowRequest(name="greet", key="versioned-3", args="{}", code_version=bad),
        )
        assert raw.code() is grpc.StatusCode.INVALID_ARGUMENT, bad
        assert "code_version" in (raw.details() or "")


async def test_start_takes_a_per_key_limit(server: str) -> None:
    async with grpc.aio.insecure_channel(server) as channel:
        stub = pb_grpc.EngineStub(channel)
        reply = await stub.StartWorkflow(
            pb.StartWorkflowRequest(
                name="greet", key="keyed-1", args='{"name": "a"}', concurrency_key="c-1"
            ),
            timeout=10,
        )
        assert reply.created and reply.record.concurrency_key == "c-1"
        assert reply.record.status == "PENDING"
    for bad, max_per_key in (("", 1), ("c", -1), ("x" * 513, 1)):
        raw = await _raw_error(
            server,
            "StartWorkflow",
            pb.StartWorkflowRequest(
                name="greet",
                key="keyed-2",
                args="{}",
                concurrency_key=bad,
                max_per_key=max_per_key,
            ),
        )
        assert raw.code() is grpc.StatusCode.INVALID_ARGUMENT, bad
        assert "concurrency_key" in (raw.details() or "") or "max_per_key" in (raw.details() or "")


async def test_start_takes_an_ordering_key_and_a_debounce(server: str) -> None:
    async with grpc.aio.insecure_channel(server) as channel:
        stub = pb_grpc.EngineStub(channel)
        ordered = await stub.StartWorkflow(
            pb.StartWorkflowRequest(
                name="greet", key="ordered-1", args='{"name": "a"}', ordering_key="line-1"
            ),
            timeout=10,
        )
        assert ordered.created and ordered.record.ordering_key == "line-1"
        assert ordered.record.ordering_seq == 1 and ordered.record.status == "PENDING"
        replies = []
        for n in range(3):
            request = pb.StartWorkflowRequest(
                name="greet",
                key=f"burst-{n}",
                args=json.dumps({"name": f"n{n}"}),
                debounce_key="d-1",
                debounce=3600.0,
            )
            replies.append(await stub.StartWorkflow(request, timeout=10))
        assert [r.created for r in replies] == [True, False, False]
        assert {r.record.key for r in replies} == {"burst-0"}
        assert json.loads(replies[-1].record.args) == {"name": "n2"}
    for field, request in (
        ("ordering_key", pb.StartWorkflowRequest(name="greet", key="b", ordering_key="")),
        ("debounce", pb.StartWorkflowRequest(name="greet", key="b", debounce_key="d")),
        (
            "debounce_max_wait",
            pb.StartWorkflowRequest(
                name="greet", key="b", debounce_key="d", debounce=5, debounce_max_wait=1
            ),
        ),
    ):
        raw = await _raw_error(server, "StartWorkflow", request)
        assert raw.code() is grpc.StatusCode.INVALID_ARGUMENT, field
        assert field in (raw.details() or ""), raw.details()


# ----------------------------------------------------------------------------- .proto only

_PROTO_CLIENT = textwrap.dedent(
    """
    import json, sys
    # The standard library (no site: -S), the generated code, and grpc's site-packages only.
    sys.path[:] = [sys.argv[1], *(p for p in sys.path[1:] if "site-packages" not in p), sys.argv[2]]
    import grpc
    from sagaway.v1 import engine_pb2 as pb, engine_pb2_grpc as pb_grpc

    assert pb.__file__.startswith(sys.argv[1]), pb.__file__


    def sdk_importable():
        try:
            import sagaway.manager  # noqa: F401
        except ImportError:
            return False
        return True

    channel = grpc.insecure_channel(sys.argv[3])
    stub = pb_grpc.EngineStub(channel)
    hello = stub.Hello(pb.HelloRequest(protocol_version=1, client="proto-only"), timeout=10)
    start = stub.StartWorkflow(
        pb.StartWorkflowRequest(name="greet", key="proto-1", args=json.dumps({"name": "zoe"})),
        timeout=10,
    )
    done = stub.AwaitWorkflow(pb.AwaitWorkflowRequest(key="proto-1", timeout=60), timeout=70)
    print(json.dumps({
        "protocol_version": hello.protocol_version,
        "created": start.created,
        "status": done.status,
        "result": json.loads(done.result),
        "sagaway_package": getattr(sys.modules["sagaway"], "__file__", None),
        "sdk_modules": sorted(
            m for m in sys.modules if m.startswith("sagaway.") and not m.startswith("sagaway.v1")
        ),
        "sdk_importable": sdk_importable(),
    }))
    channel.close()
    """
)


async def test_client_built_from_the_proto_alone(server: str, tmp_path: Path) -> None:
    out = tmp_path / "gen"
    out.mkdir()
    protoc = await asyncio.create_subprocess_exec(
        *(PYTHON, "-m", "grpc_tools.protoc", "-I", "proto", f"--python_out={out}"),
        *(f"--grpc_python_out={out}", "proto/sagaway/v1/engine.proto"),
        cwd=ROOT,
    )
    assert await asyncio.wait_for(protoc.wait(), 60) == 0
    script = tmp_path / "client.py"
    script.write_text(_PROTO_CLIENT)
    site = str(Path(grpc.__file__).resolve().parent.parent)
    app = build_app(f"grpc://{server}")
    async with app:  # workers of an application that registered "greet"
        # -I -S: no environment, no site (so no .pth file puts the SDK on the path).
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-S",
            str(script),
            str(out),
            site,
            server,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, stderr.decode()
    seen = json.loads(stdout)
    assert seen["protocol_version"] == 1
    assert seen["created"] is True
    assert seen["status"] == WorkflowStatus.COMPLETED.value
    assert seen["result"] == {"greeting": "HELLO ZOE", "name": "zoe"}
    # "sagaway" there is the generated namespace package only, never the SDK.
    assert seen["sagaway_package"] is None
    assert seen["sdk_modules"] == []
    assert seen["sdk_importable"] is False


def test_generated_code_is_not_stale() -> None:
    check = subprocess.run(
        [PYTHON, "scripts/gen_proto.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stdout + check.stderr


# ----------------------------------------------------------------------------- graceful stop


async def test_sigterm_lets_calls_in_flight_finish_then_exits_0(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    process = ServerProcess(db)
    try:
        address = process.wait_ready()
        assert re.fullmatch(r"listening on 127\.0\.0\.1:\d+", process.ready_line)
        async with grpc.aio.insecure_channel(address) as channel:
            stub = pb_grpc.EngineStub(channel)
            await stub.StartWorkflow(
                pb.StartWorkflowRequest(name="greet", key="inflight", args='{"name": "x"}'),
                timeout=10,
            )
            waiting = asyncio.ensure_future(
                stub.AwaitWorkflow(pb.AwaitWorkflowRequest(key="inflight", timeout=60), timeout=70)
            )
            # A later call on the same connection answered: the server has taken the first.
            await stub.ServerTime(pb.ServerTimeRequest(), timeout=10)
            assert not waiting.done()
            process.proc.send_signal(signal.SIGTERM)
            # End the workflow behind the server's back: the call in flight sees it.
            direct = open_store(db)
            await direct.open()
            try:
                record = await direct.get_workflow("inflight")
                assert record is not None
                assert await direct.end_workflow(
                    record.run_id, status=WorkflowStatus.TERMINATED, error=None, now=time.time()
                )
            finally:
                await direct.close()
            ended = await asyncio.wait_for(waiting, 30)
        assert ended.status == WorkflowStatus.TERMINATED.value
        assert await asyncio.to_thread(process.proc.wait, 30) == 0
        assert "Traceback" not in "".join(process.stderr_lines)
    finally:
        process.stop()
