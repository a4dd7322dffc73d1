"""``sagaway server --tokens-file``: bad files refused at start (exit 2, one line), reloaded on
SIGHUP (a bad reload keeps the previous one), beside ``--token-file``, and client certificates
mapped to roles under mutual TLS."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from sagaway import credentials
from sagaway.principals import Role
from sagaway.v1 import engine_pb2 as pb
from sagaway.v1 import engine_pb2_grpc as pb_grpc
from tests.integration.server_support import (
    PYTHON,
    ROOT,
    ServerProcess,
    child_env,
    issue,
    make_ca,
)

pytestmark = pytest.mark.grpc


def _entry(name: str, role: Role, token: str) -> str:
    return credentials.toml_entry(name, [role], credentials.digest(token))


async def _code(address: str, rpc: str, token: str | None, **tls: Any) -> grpc.StatusCode:
    """The status of one ``rpc`` call with an empty request (OK, or why it ended)."""
    return (await _call(address, rpc, token, **tls))[0]


async def _call(
    address: str, rpc: str, token: str | None, **tls: Any
) -> tuple[grpc.StatusCode, str]:
    """The status and details of one ``rpc`` call with an empty request."""
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    if tls:
        channel = grpc.aio.secure_channel(address, grpc.ssl_channel_credentials(**tls))
    else:
        channel = grpc.aio.insecure_channel(address)
    async with channel:
        stub: Any = pb_grpc.EngineStub(channel)
        method = pb.DESCRIPTOR.services_by_name["Engine"].methods_by_name[rpc]
        request = getattr(pb, method.input_type.name)()
        try:
            await getattr(stub, rpc)(request, metadata=metadata, timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


def _start(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    db = f"sqlite:///{tmp_path}/db.sqlite"
    return subprocess.run(
        [PYTHON, "-m", "sagaway.cli.main", "server", "--db", db, "--listen", "127.0.0.1:0", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(),
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[[token]]\nname = "x"\nroles = ["reader"]\nsha256 = "' + "a" * 64 + '"\n',
            "unknown role",
        ),
        ("[[token]]\nname = 'x'\nroles = ['read']\n", "exactly one of 'sha256'"),
        ('[[certificate]]\ncommon_name = "w"\nroles = ["worker"]\n', "need mutual TLS"),
    ],
)
def test_a_bad_tokens_file_stops_the_server_with_one_line(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(text)
    done = _start(tmp_path, "--tokens-file", str(path))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and str(path) in lines[0], done.stderr
    assert done.stdout == ""


def test_a_missing_tokens_file_stops_the_server(tmp_path: Path) -> None:
    done = _start(tmp_path, "--tokens-file", str(tmp_path / "nope.toml"))
    assert done.returncode == 2
    assert "cannot read the tokens file" in done.stderr


async def test_sighup_reloads_the_tokens_file_and_a_bad_one_changes_nothing(
    tmp_path: Path,
) -> None:
    """Rotating a token without a restart: add the new one, SIGHUP, move the clients over,
    remove the old one, SIGHUP."""
    path = tmp_path / "tokens.toml"
    path.write_text(_entry("app", Role.OPERATE, "old"))
    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    server = ServerProcess(db, "--tokens-file", str(path))
    try:
        address = server.wait_ready()
        assert await _code(address, "GetWorkflow", "old") is grpc.StatusCode.OK
        assert await _code(address, "GetWorkflow", "new") is grpc.StatusCode.UNAUTHENTICATED

        path.write_text(_entry("app", Role.OPERATE, "old") + _entry("app-2", Role.OPERATE, "new"))
        seen = len(server.stderr_lines)
        server.proc.send_signal(signal.SIGHUP)
        line = server.wait_for_stderr("tokens file reloaded", after=seen)
        assert "2 tokens, 0 certificates" in line
        for token in ("old", "new"):
            assert await _code(address, "GetWorkflow", token) is grpc.StatusCode.OK

        path.write_text("[[token]]\nname = 'app-2'\n")  # broken: the old set stays
        seen = len(server.stderr_lines)
        server.proc.send_signal(signal.SIGHUP)
        line = server.wait_for_stderr("NOT reloaded", after=seen)
        assert "missing field 'roles'" in line
        assert await _code(address, "GetWorkflow", "old") is grpc.StatusCode.OK

        path.write_text(_entry("app-2", Role.READ, "new"))  # old removed; new now read-only
        seen = len(server.stderr_lines)
        server.proc.send_signal(signal.SIGHUP)
        server.wait_for_stderr("tokens file reloaded", after=seen)
        assert await _code(address, "GetWorkflow", "old") is grpc.StatusCode.UNAUTHENTICATED
        assert await _code(address, "GetWorkflow", "new") is grpc.StatusCode.OK
        assert await _code(address, "RetryNow", "new") is grpc.StatusCode.PERMISSION_DENIED
        assert server.proc.poll() is None
    finally:
        server.stop()


async def test_token_file_and_tokens_file_together(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(_entry("dash", Role.READ, "t-dash"))
    single = tmp_path / "token"
    single.write_text("t-default\n")
    single.chmod(0o600)
    server = ServerProcess(
        f"sqlite:///{tmp_path / 'db.sqlite'}",
        *("--tokens-file", str(path), "--token-file", str(single)),
    )
    try:
        address = server.wait_ready()
        server.wait_for_stderr("accepted too, as principal 'default' with every role")
        assert await _code(address, "PurgeEnded", "t-default") is not (
            grpc.StatusCode.PERMISSION_DENIED
        )
        assert await _code(address, "PurgeEnded", "t-dash") is grpc.StatusCode.PERMISSION_DENIED
        assert await _code(address, "GetWorkflow", None) is grpc.StatusCode.UNAUTHENTICATED
    finally:
        server.stop()


async def test_client_certificates_map_to_roles_under_mutual_tls(tmp_path: Path) -> None:
    ca = make_ca(tmp_path, "trusted")
    server_pair = issue(ca, tmp_path, "server", server=True)
    runner = issue(ca, tmp_path, "runner", server=False)
    laptop = issue(ca, tmp_path, "laptop", server=False)
    stranger = issue(ca, tmp_path, "stranger", server=False)  # signed, but not listed
    path = tmp_path / "tokens.toml"
    path.write_text(
        '[[certificate]]\ncommon_name = "runner"\nroles = ["worker"]\n'
        '[[certificate]]\nsubject = "CN=laptop"\nname = "on-call"\nroles = ["read"]\n'
        + _entry("ops", Role.OPERATE, "t-ops")
    )
    server = ServerProcess(
        f"sqlite:///{tmp_path / 'db.sqlite'}",
        *("--tls-cert", str(server_pair.cert), "--tls-key", str(server_pair.key)),
        *("--tls-client-ca", str(ca.pem), "--tokens-file", str(path)),
    )

    def tls(pair: Any) -> dict[str, bytes]:
        return {
            "root_certificates": ca.pem.read_bytes(),
            "private_key": pair.key.read_bytes(),
            "certificate_chain": pair.cert.read_bytes(),
        }

    try:
        address = server.wait_ready().replace("127.0.0.1", "localhost")
        ok, denied = grpc.StatusCode.OK, grpc.StatusCode.PERMISSION_DENIED
        assert await _code(address, "RenewLeases", None, **tls(runner)) is ok
        assert await _code(address, "RetryNow", None, **tls(runner)) is denied
        assert await _code(address, "GetWorkflow", None, **tls(laptop)) is ok
        code, details = await _call(address, "RenewLeases", None, **tls(laptop))
        assert code is denied
        assert details.startswith("principal 'on-call' (roles: read) may not call RenewLeases")
        code, details = await _call(address, "RetryNow", None, **tls(runner))
        assert "principal 'CN=runner' (roles: worker)" in details
        code, details = await _call(address, "GetWorkflow", None, **tls(stranger))
        assert code is grpc.StatusCode.UNAUTHENTICATED
        assert "the client certificate 'CN=stranger' is not in the tokens file" in details
        # A token names the caller whatever certificate carries it.
        assert await _code(address, "RetryNow", "t-ops", **tls(stranger)) is ok
        assert await _code(address, "RetryNow", "t-ops", **tls(runner)) is ok
    finally:
        server.stop()
