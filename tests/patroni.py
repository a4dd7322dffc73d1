"""A Patroni cluster for the failover tests: one etcd and two Patroni-managed PostgreSQL 15 nodes
with synchronous replication, on free ports of 127.0.0.1, in a directory of their own.

``running_cluster()`` starts Debian's ``etcd`` and two ``patroni`` processes (as the ``postgres``
user when the tests run as root: PostgreSQL refuses to run as root), each in a process group of
its own, waits until one node leads and the other replicates synchronously, and yields a
``Cluster``: the multi-host URL (``target_session_attrs=read-write``: libpq connects to whichever
node accepts writes), which node leads, and how to kill its postmaster or switch over. On the way
out, failed or not, it kills every process group and removes the directory.

Outside CI a missing ``patroni``, ``etcd`` or PostgreSQL 15 skips the tests that need them;
under ``CI=true`` it fails them (``.ci/run`` installs ``patroni`` and ``etcd-server``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

PG_BIN = "/usr/lib/postgresql/15/bin"
SCOPE = "sagaway-failover"


def require_patroni() -> tuple[str, str]:
    """The paths of ``patroni`` and ``etcd``; skip (or, under CI=true, fail) when missing."""
    patroni = shutil.which("patroni")
    etcd = shutil.which("etcd") or ("/usr/bin/etcd" if os.path.exists("/usr/bin/etcd") else None)
    missing = [
        name
        for name, found in (
            ("patroni", patroni),
            ("etcd (etcd-server)", etcd),
            (f"PostgreSQL 15 ({PG_BIN})", os.path.exists(f"{PG_BIN}/postgres") or None),
        )
        if not found
    ]
    if patroni is not None and etcd is not None and not missing:
        return patroni, etcd
    reason = f"{', '.join(missing)} not installed (apt-get install patroni etcd-server)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + " (CI=true: the failover tests must run)")
    pytest.skip(reason)


def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


@dataclasses.dataclass
class Node:
    name: str
    pg_port: int
    rest_port: int
    data_dir: Path
    config: Path
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def conninfo(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.pg_port}/postgres"

    def rest(self, path: str, *, method: str = "GET", body: object = None) -> tuple[int, str]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.rest_port}/{path}", data=data, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode()
        except OSError as exc:
            return 0, str(exc)

    def postmaster_pid(self) -> int:
        return int((self.data_dir / "postmaster.pid").read_text().split()[0])


@dataclasses.dataclass
class Cluster:
    nodes: list[Node]
    directory: Path

    @property
    def url(self) -> str:
        """The multi-host libpq URL of database ``postgres``: libpq tries the hosts in turn
        and keeps the one that accepts writes."""
        hosts = ",".join(f"127.0.0.1:{node.pg_port}" for node in self.nodes)
        return f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write"

    def leader(self, timeout: float = 60.0) -> Node:
        """The node whose REST API says it is the primary (waits up to ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            for node in self.nodes:
                if node.rest("primary")[0] == 200:
                    return node
            if time.monotonic() > deadline:
                raise RuntimeError("no Patroni leader;\n" + self.logs())
            time.sleep(0.2)

    def wait_sync_replica(self, timeout: float = 60.0) -> Node:
        """The node that is the synchronous standby, once there is one streaming."""
        deadline = time.monotonic() + timeout
        while True:
            for node in self.nodes:
                if node.rest("synchronous")[0] == 200:
                    return node
            if time.monotonic() > deadline:
                raise RuntimeError("no synchronous standby;\n" + self.logs())
            time.sleep(0.2)

    def switchover(self, leader: Node, candidate: Node) -> None:
        """A clean switchover through the REST API (``patronictl switchover`` does the same)."""
        status, text = leader.rest(
            "switchover", method="POST", body={"leader": leader.name, "candidate": candidate.name}
        )
        if status != 200:
            raise RuntimeError(f"switchover refused ({status}): {text}")

    def logs(self) -> str:
        out = []
        for node in self.nodes:
            with contextlib.suppress(OSError):
                out.append(f"--- {node.name}\n" + node.log.read_text()[-4000:])
        return "\n".join(out)


def _config(cluster_dir: Path, node: Node, etcd_port: int, socket_dir: Path) -> str:
    # Patroni reads YAML; JSON is YAML.
    config = {
        "scope": SCOPE,
        "namespace": "/sagaway/",
        "name": node.name,
        "log": {"level": "INFO"},
        "restapi": {
            "listen": f"127.0.0.1:{node.rest_port}",
            "connect_address": f"127.0.0.1:{node.rest_port}",
        },
        "etcd3": {"hosts": f"127.0.0.1:{etcd_port}"},
        "bootstrap": {
            "dcs": {
                # Short timeouts: a failover within seconds (loop_wait + 2 * retry_timeout <= ttl).
                "ttl": 10,
                "loop_wait": 1,
                "retry_timeout": 4,
                "maximum_lag_on_failover": 1048576,
                "synchronous_mode": True,
                "postgresql": {
                    # Without pg_rewind Patroni restarts a crashed leader's PostgreSQL at once
                    # (crash recovery in the normal start); with it, it first runs crash
                    # recovery in single-user mode (3-4 s more here). No node rejoins after
                    # diverging in these tests, so nothing needs rewinding.
                    "use_pg_rewind": False,
                    "parameters": {
                        "synchronous_commit": "on",
                        "wal_log_hints": "on",
                        "max_connections": 100,
                        "max_wal_senders": 5,
                        "max_replication_slots": 5,
                        "track_commit_timestamp": "on",
                        # The standby reconnects to a restarted primary within a second (default
                        # 5 s): synchronous commits wait for it.
                        "wal_retrieve_retry_interval": "1s",
                    },
                },
            },
            "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}],
            "pg_hba": [
                "host replication replicator 127.0.0.1/32 trust",
                "host all all 127.0.0.1/32 trust",
                "local all all trust",
            ],
        },
        "postgresql": {
            "listen": f"127.0.0.1:{node.pg_port}",
            "connect_address": f"127.0.0.1:{node.pg_port}",
            "data_dir": str(node.data_dir),
            "bin_dir": PG_BIN,
            "pgpass": str(cluster_dir / f"pgpass-{node.name}"),
            "authentication": {
                "replication": {"username": "replicator", "password": "replicator"},
                "superuser": {"username": "postgres", "password": "postgres"},
            },
            "parameters": {"unix_socket_directories": str(socket_dir)},
        },
    }
    return json.dumps(config, indent=1)


def _as_postgres() -> dict[str, object]:
    """Popen arguments that run a child as the ``postgres`` user when the tests run as root."""
    if os.geteuid() != 0:
        return {}
    entry = pwd.getpwnam("postgres")
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _chown_tree(path: Path) -> None:
    if os.geteuid() != 0:
        return
    entry = pwd.getpwnam("postgres")
    for root, dirs, files in os.walk(path):
        os.chown(root, entry.pw_uid, entry.pw_gid)
        for name in dirs + files:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)


def _kill_group(process: subprocess.Popen[bytes] | None) -> None:
    if process is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(10)


def _start(command: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=log.parent,
            start_new_session=True,  # a process group of its own: killed whole at the end
            **_as_postgres(),
        )


def start_node(node: Node, patroni: str, env: dict[str, str]) -> None:
    """(Re)start ``node``'s Patroni (its PostgreSQL with it)."""
    node.process = _start([patroni, str(node.config)], node.log, env)


def kill_node(node: Node) -> None:
    """The whole node crashes: Patroni and its PostgreSQL, killed -9 (the group)."""
    _kill_group(node.process)
    with contextlib.suppress(OSError, ValueError, ProcessLookupError):
        os.kill(node.postmaster_pid(), signal.SIGKILL)


def _wait_for_sql(node: Node, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(node.conninfo, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextlib.contextmanager
def running_cluster() -> Iterator[Cluster]:
    """A started etcd and two Patroni nodes, one leading and one a synchronous standby."""
    patroni, etcd = require_patroni()
    directory = Path(tempfile.mkdtemp(prefix="sagaway-patroni-"))
    directory.chmod(0o755)
    etcd_port, etcd_peer, pg1, pg2, rest1, rest2 = _free_ports(6)
    socket_dir = directory / "sockets"
    socket_dir.mkdir()
    nodes = [
        Node(f"node{i}", pg, rest, directory / f"data{i}", directory / f"node{i}.yml",
             directory / f"node{i}.log")
        for i, pg, rest in ((1, pg1, rest1), (2, pg2, rest2))
    ]  # fmt: skip
    for node in nodes:
        node.config.write_text(_config(directory, node, etcd_port, socket_dir))
    _chown_tree(directory)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["HOME"] = str(directory)
    etcd_process = None
    try:
        etcd_process = _start(
            [
                etcd,
                "--name=sagaway-test",
                f"--data-dir={directory / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=sagaway-test=http://127.0.0.1:{etcd_peer}",
            ],
            directory / "etcd.log",
            env,
        )
        start_node(nodes[0], patroni, env)
        cluster = Cluster(nodes, directory)
        leader = cluster.leader(timeout=90)
        _wait_for_sql(leader)
        start_node(nodes[1], patroni, env)
        cluster.wait_sync_replica(timeout=120)
        yield cluster
    finally:
        for node in nodes:
            kill_node(node)
        _kill_group(etcd_process)
        shutil.rmtree(directory, ignore_errors=True)
