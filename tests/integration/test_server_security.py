"""The Engine Server's door: bearer tokens (refused without one or with a wrong one; health
needs none), and TLS / mutual TLS with certificates made at test time."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sagaway.store import StoreUnavailable
from sagaway.store.grpc import ServerRefused
from sagaway.v1 import engine_pb2 as pb
from sagaway.v1 import engine_pb2_grpc as pb_grpc
from tests.grpc_server import ServerProcess as Served
from tests.integration.server_support import (
    PYTHON,
    ROOT,
    Authority,
    Issued,
    ServerProcess,
    build_app,
    child_env,
    issue,
    make_ca,
)

pytestmark = pytest.mark.grpc
TOKEN = "s3cret"


@pytest.fixture
def token_server(tmp_path: Path) -> Iterator[Served]:
    with Served(f"sqlite:///{tmp_path / 'db.sqlite'}", token=TOKEN) as server:
        yield server


# ----------------------------------------------------------------------------- tokens


async def test_manager_without_token_is_refused(
    token_server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SAGAWAY_TOKEN", raising=False)
    with pytest.raises(ServerRefused, match="no token"):
        async with build_app(token_server.url).connect():
            pass


async def test_manager_with_wrong_token_is_refused(token_server: Served) -> None:
    with pytest.raises(ServerRefused, match="wrong token"):
        async with build_app(token_server.url, token="guess").connect():
            pass


async def test_manager_with_token_runs_a_workflow(token_server: Served) -> None:
    app = build_app(token_server.url, token=TOKEN)
    async with app:
        result = await app.workflow("greet", "ada").execute_get(timeout=30)
    assert result == {"greeting": "HELLO ADA", "name": "ada"}


async def test_raw_call_without_metadata_is_unauthenticated(token_server: Served) -> None:
    async with grpc.aio.insecure_channel(token_server.address) as channel:
        stub = pb_grpc.EngineStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Hello(pb.HelloRequest(protocol_version=1), timeout=5)
        assert caught.value.code() is grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GetWorkflow(
                pb.KeyRequest(key="k"), timeout=5, metadata=(("authorization", "Bearer nope"),)
            )
        assert caught.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert caught.value.details() == "wrong token"
        # Bytes that are not a request at all: the token is still judged first.
        raw: Any = channel.unary_unary("/sagaway.v1.Engine/Hello")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await raw(b"\x00\xff", timeout=5)
        assert caught.value.code() is grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await raw(b"\x00\xff", timeout=5, metadata=(("authorization", f"Bearer {TOKEN}"),))
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        # The stream is guarded too.
        stream = stub.Watch(pb.WatchRequest(), timeout=5)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in stream:
                pass
        assert caught.value.code() is grpc.StatusCode.UNAUTHENTICATED


async def test_health_check_needs_no_token(token_server: Served) -> None:
    """A documented choice: orchestrators probe health without the secret."""
    async with grpc.aio.insecure_channel(token_server.address) as channel:
        health: Any = health_pb2_grpc.HealthStub(channel)
        for service in ("", "sagaway.v1.Engine"):
            reply = await health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


def _cli_list(address: str, token: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "sagaway.cli.main", "list", "--db", f"grpc://{address}"],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(SAGAWAY_TOKEN=token),
        cwd=ROOT,
    )


def test_server_process_token_file_and_cli_refusal(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\n")
    server = ServerProcess(f"sqlite:///{tmp_path / 'db.sqlite'}", "--token-file", str(token_file))
    try:
        address = server.wait_ready()
        wrong = _cli_list(address, "not-it")
        assert wrong.returncode != 0
        lines = wrong.stderr.strip().splitlines()
        assert len(lines) == 1, wrong.stderr
        assert "wrong token" in lines[0]
        assert "Traceback" not in wrong.stderr
        right = _cli_list(address, TOKEN)
        assert right.returncode == 0, right.stderr
    finally:
        server.stop()


def test_server_process_reads_the_token_from_its_environment(tmp_path: Path) -> None:
    env = child_env(SAGAWAY_SERVER_TOKEN=TOKEN)
    server = ServerProcess(f"sqlite:///{tmp_path / 'db.sqlite'}", env=env)
    try:
        address = server.wait_ready()
        missing = _cli_list(address, "")
        assert missing.returncode != 0
        assert "no token" in missing.stderr
        assert len(missing.stderr.strip().splitlines()) == 1, missing.stderr
        assert _cli_list(address, TOKEN).returncode == 0
    finally:
        server.stop()


# ----------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Authority | Issued]:
    folder = tmp_path_factory.mktemp("pki")
    ca = make_ca(folder, "trusted")
    stranger = make_ca(folder, "stranger")
    return {
        "ca": ca,
        "stranger": stranger,
        "server": issue(ca, folder, "server", server=True),
        "client": issue(ca, folder, "client", server=False),
        "forged": issue(stranger, folder, "forged", server=False),
    }


def _ca(pki: dict[str, Authority | Issued], name: str = "ca") -> Path:
    ca = pki[name]
    assert isinstance(ca, Authority)
    return ca.pem


def _pair(pki: dict[str, Authority | Issued], name: str) -> Issued:
    pair = pki[name]
    assert isinstance(pair, Issued)
    return pair


async def test_tls_client_with_the_ca_runs_a_workflow(
    tmp_path: Path, pki: dict[str, Authority | Issued]
) -> None:
    server = _pair(pki, "server")
    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with Served(db, tls_cert=server.cert, tls_key=server.key) as running:
        port = running.address.rsplit(":", 1)[1]
        for host in ("127.0.0.1", "localhost"):
            app = build_app(f"grpcs://{host}:{port}?ca={_ca(pki)}")
            async with app:
                result = await app.workflow("greet", host).execute_get(timeout=30)
            assert result["greeting"] == f"HELLO {host.upper()}"
        # A client that does not trust the server's CA is refused by its own side.
        with pytest.raises(StoreUnavailable, match="does not trust the certificate"):
            async with build_app(f"grpcs://127.0.0.1:{port}?ca={_ca(pki, 'stranger')}").connect():
                pass
        # A plain client at a TLS server is told it may need grpcs://.
        with pytest.raises(StoreUnavailable, match="grpcs://"):
            async with build_app(f"grpc://127.0.0.1:{port}").connect():
                pass


@pytest.fixture(scope="module")
def mtls_server(
    tmp_path_factory: pytest.TempPathFactory, pki: dict[str, Authority | Issued]
) -> Iterator[str]:
    """``sagaway server`` requiring client certificates signed by the trusted CA."""
    folder = tmp_path_factory.mktemp("mtls")
    server = _pair(pki, "server")
    process = ServerProcess(
        f"sqlite:///{folder / 'db.sqlite'}",
        *("--tls-cert", str(server.cert), "--tls-key", str(server.key)),
        *("--tls-client-ca", str(_ca(pki))),
    )
    try:
        yield process.wait_ready()
    finally:
        process.stop()


async def test_mtls_client_without_certificate_is_refused(
    mtls_server: str, pki: dict[str, Authority | Issued]
) -> None:
    started = time.monotonic()
    with pytest.raises((StoreUnavailable, ServerRefused)) as caught:
        async with build_app(f"grpcs://{mtls_server}?ca={_ca(pki)}").connect():
            pass
    assert time.monotonic() - started < 8
    message = str(caught.value)
    assert mtls_server in message
    assert "TLS handshake" in message and "client certificate" in message, message


async def test_mtls_client_with_certificate_runs_a_workflow(
    mtls_server: str, pki: dict[str, Authority | Issued]
) -> None:
    client = _pair(pki, "client")
    url = f"grpcs://{mtls_server}?ca={_ca(pki)}&cert={client.cert}&key={client.key}"
    app = build_app(url)
    async with app:
        handle = await app.workflow("greet", "grace").execute(idempotency_key="mtls-1")
        assert await handle.result(timeout=30) == {"greeting": "HELLO GRACE", "name": "grace"}


async def test_mtls_client_with_certificate_of_another_ca_is_refused(
    mtls_server: str, pki: dict[str, Authority | Issued]
) -> None:
    forged = _pair(pki, "forged")
    url = f"grpcs://{mtls_server}?ca={_ca(pki)}&cert={forged.cert}&key={forged.key}"
    with pytest.raises((StoreUnavailable, ServerRefused)) as caught:
        async with build_app(url).connect():
            pass
    assert "did not accept this client certificate" in str(caught.value), str(caught.value)
