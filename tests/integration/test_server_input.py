"""The Engine Server refuses, as INVALID_ARGUMENT, input that used to reach the store or crash
a handler: arguments nested deeper than the interpreter can read (a RecursionError, reported as
INTERNAL before), keys and names holding control characters, names longer than the limit."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import grpc.aio
import pytest

from sagaway.identifiers import MAX_NAME
from sagaway.v1 import engine_pb2 as pb
from sagaway.v1 import engine_pb2_grpc as pb_grpc
from tests.integration.server_support import ServerProcess

pytestmark = pytest.mark.grpc


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("input")
    process = ServerProcess(f"sqlite:///{folder / 'db.sqlite'}")
    try:
        yield process.wait_ready()
    finally:
        process.stop()


async def _refusal(address: str, method: str, request: object) -> grpc.aio.AioRpcError:
    async with grpc.aio.insecure_channel(address) as channel:
        call = getattr(pb_grpc.EngineStub(channel), method)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(request, timeout=10)
    return caught.value


async def test_deeply_nested_arguments_are_invalid_not_internal(server: str) -> None:
    depth = 20_000
    args = '{"a": ' + "[" * depth + "]" * depth + "}"
    error = await _refusal(
        server, "StartWorkflow", pb.StartWorkflowRequest(name="greet", key="deep", args=args)
    )
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert "nest too deeply" in str(error.details())


@pytest.mark.parametrize(
    ("key", "name", "expected"),
    [
        ("k\x1b[2J", "greet", "key must not contain control characters"),
        ("k\r\n", "greet", "key must not contain control characters"),
        ("ok-key", "greet\x1b]8;;https://evil/\x07", "name must not contain control characters"),
        ("ok-key", "greet\x9b", "name must not contain control characters"),
        ("ok-key", "g" * (MAX_NAME + 1), f"name must be at most {MAX_NAME} characters"),
    ],
)
async def test_start_refuses_control_characters_and_long_names(
    server: str, key: str, name: str, expected: str
) -> None:
    request = pb.StartWorkflowRequest(name=name, key=key, args="{}")
    error = await _refusal(server, "StartWorkflow", request)
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert expected in str(error.details())


async def test_signal_names_with_control_characters_are_refused(server: str) -> None:
    async with grpc.aio.insecure_channel(server) as channel:
        stub = pb_grpc.EngineStub(channel)
        await stub.StartWorkflow(pb.StartWorkflowRequest(name="greet", key="sig", args="{}"))
    request = pb.SendSignalRequest(key="sig", name="go\x1b[2J", payload="1")
    error = await _refusal(server, "SendSignal", request)
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert "name must not contain control characters" in str(error.details())


@pytest.mark.parametrize(
    ("method", "request_", "expected"),
    [
        (
            "CreateWorkflow",
            pb.CreateWorkflowRequest(
                new=pb.NewWorkflow(run_id="r1", key="k\x1b[2J", name="greet", args="{}")
            ),
            "key must not contain control characters",
        ),
        (
            "CreateWorkflow",
            pb.CreateWorkflowRequest(
                new=pb.NewWorkflow(run_id="r2", key="k", name="greet\r", args="{}")
            ),
            "name must not contain control characters",
        ),
        (
            "ForkWorkflow",
            pb.ForkWorkflowRequest(source_run_id="r0", run_id="r3", key="k\n", key_space="k"),
            "key must not contain control characters",
        ),
        (
            "PutSchedule",
            pb.PutScheduleRequest(
                schedule=pb.ScheduleRecord(
                    id="nightly\x1b]8;;x\x07",
                    workflow="greet",
                    args="{}",
                    cron="0 0 * * *",
                    timezone="UTC",
                    catch_up="skip",
                )
            ),
            "schedule id must not contain control characters",
        ),
    ],
)
async def test_worker_calls_refuse_control_characters_too(
    server: str, method: str, request_: object, expected: str
) -> None:
    error = await _refusal(server, method, request_)
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert expected in str(error.details())
