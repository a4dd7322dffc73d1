"""A PgBouncer in transaction pooling mode in front of the test PostgreSQL server.

``running_pgbouncer()`` writes a ``pgbouncer.ini`` into a directory of its own (pool_mode =
transaction, trust authentication, a free port on 127.0.0.1), starts Debian's ``pgbouncer``
(as the ``postgres`` user when the tests run as root: PgBouncer refuses to run as root), waits
until it answers, and stops it afterwards. Outside CI a missing ``pgbouncer`` skips the tests that
need it; under ``CI=true`` it fails them (``.ci/run`` installs it).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

POOLER_PARAM = "pooler=transaction"
"""What a Sagaway URL through the pooler says (``sagaway.store.postgres.url``)."""
_BINARY = "pgbouncer"
_DEBIAN_PATH = "/usr/sbin/pgbouncer"


def _binary() -> str | None:
    return shutil.which(_BINARY) or (_DEBIAN_PATH if os.path.exists(_DEBIAN_PATH) else None)


def require_pgbouncer() -> str:
    """The path of ``pgbouncer``; skip (or, under CI=true, fail) when it is not installed."""
    found = _binary()
    if found is not None:
        return found
    reason = "pgbouncer is not installed (apt-get install pgbouncer)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + " (CI=true: the PgBouncer tests must run)")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _quoted(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def _write_config(directory: Path, upstream: dict[str, str], port: int) -> Path:
    user = upstream.get("user", "postgres")
    (directory / "userlist.txt").write_text(
        f"{_quoted(user)} {_quoted(upstream.get('password', ''))}\n"
    )
    host = upstream.get("host", "127.0.0.1")
    ini = directory / "pgbouncer.ini"
    ini.write_text(
        "[databases]\n"
        f"* = host={host} port={upstream.get('port', '5432')}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = trust\n"
        f"auth_file = {directory / 'userlist.txt'}\n"
        "pool_mode = transaction\n"
        # The server allows 100 connections and the other tests hold some: clients wait for
        # one of these instead (that is what a pooler is for).
        "default_pool_size = 20\n"
        "max_client_conn = 1000\n"
        "server_check_delay = 0\n"
    )
    return ini


def _wait_until_it_answers(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 15.0
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError as exc:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"pgbouncer did not start ({exc}); its log:\n{log.read_text()}"
                ) from exc
            time.sleep(0.1)


@contextlib.contextmanager
def running_pgbouncer(postgres_url: str) -> Iterator[str]:
    """A started PgBouncer in front of ``postgres_url``'s server; yields the plain libpq URL of
    the same database through it (without Sagaway's ``pooler`` parameter)."""
    binary = require_pgbouncer()
    upstream = conninfo_to_dict(postgres_url)
    directory = Path(tempfile.mkdtemp(prefix="sagaway-pgbouncer-"))
    as_root = os.geteuid() == 0
    try:
        port = _free_port()
        ini = _write_config(directory, {k: str(v) for k, v in upstream.items()}, port)
        command = [binary, str(ini)]
        if as_root:  # "PgBouncer should not run as root": it switches to this user itself
            directory.chmod(0o755)
            command[1:1] = ["-u", pwd.getpwnam("postgres").pw_name]
        log = directory / "pgbouncer.log"
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            user = urllib.parse.quote(str(upstream.get("user", "postgres")))
            dbname = urllib.parse.quote(str(upstream.get("dbname", "postgres")))
            url = f"postgresql://{user}@127.0.0.1:{port}/{dbname}"
            _wait_until_it_answers(url, process, log)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
