"""An Engine Server for tests: ``sagaway server`` as a child process of the test run.

Each ``grpc+…`` test gets its own, in front of its own fresh database, on a free port; starting
one takes a few hundred milliseconds. A process rather than a thread: gRPC's asyncio support
is made for one event loop per process, and a real process is what applications meet.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.server_zygote import Forked, Zygote

STARTUP_TIMEOUT = 30.0


class ServerProcess:
    """``sagaway server --db url`` on ``listen`` (default: a free port), until ``stop()``.

    ``config``: ``token``, ``tokens_file``, ``tls_cert``, ``tls_key``, ``tls_client_ca`` (paths),
    ``payload_limit`` and ``max_lease``, as the command's options; ``trust_client_clock=True``
    (the storage tests' servers: their clients drive time with fake clocks and literal times).

    ``zygote``: fork the process from there (tests/server_zygote.py: the pool's servers, which
    then start in milliseconds) rather than start an interpreter.
    """

    def __init__(
        self, url: str, *, listen: str = "127.0.0.1:0", zygote: Zygote | None = None, **config: Any
    ) -> None:
        self.db_url = url
        self.listen = listen
        self.config = config
        self.address = ""
        self.zygote = zygote
        self.process: subprocess.Popen[str] | Forked | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="sagaway-server-")
        self.log = Path(self._tmp.name) / "server.log"
        """The server's stderr."""

    @property
    def url(self) -> str:
        scheme = "grpcs" if self.config.get("tls_cert") else "grpc"
        return f"{scheme}://{self.address}"

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "sagaway", "server", "--db", self.db_url]
        args += ["--listen", self.listen]
        token = self.config.get("token")
        if token is not None:
            path = Path(self._tmp.name) / "token"
            path.write_text(token, encoding="utf-8")
            args += ["--token-file", str(path)]
        for name in (
            "tokens_file",
            "tls_cert",
            "tls_key",
            "tls_client_ca",
            "payload_limit",
            "max_lease",
        ):
            if self.config.get(name) is not None:
                args += [f"--{name.replace('_', '-')}", str(self.config[name])]
        if self.config.get("trust_client_clock"):
            args.append("--trust-client-clock")
        return args

    def start(self) -> ServerProcess:
        return self.spawn().wait_ready()

    def spawn(self) -> ServerProcess:
        """Start the process without waiting for it: ``wait_ready()`` later (a pool starts the
        next test's server while the current test runs)."""
        env = dict(os.environ)
        env.pop("SAGAWAY_SERVER_TOKEN", None)
        if self.zygote is not None:
            self.process = self.zygote.spawn(self.command()[3:], env, self.log)
            return self
        # stderr to a file: a pipe nobody reads would block a server that logs much.
        with self.log.open("a", encoding="utf-8") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=subprocess.PIPE, stderr=log, text=True, env=env
            )
        return self

    def wait_ready(self) -> ServerProcess:
        """Wait for the ``listening on`` line of a spawned server; kill it if none comes."""
        assert self.process is not None, "spawn() first"
        if self.address:
            return self
        line = _read_line(self.process.stdout, STARTUP_TIMEOUT)
        if not line.startswith("listening on "):
            self.kill()
            raise RuntimeError(
                f"the test server did not start: {line!r} {self.log.read_text(encoding='utf-8')}"
            )
        self.address = line.removeprefix("listening on ").strip()
        return self

    def terminate(self) -> None:
        """SIGTERM without waiting: ``stop()`` (or ``kill()``) reaps it later."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def stop(self) -> int | None:
        """SIGTERM, then wait (SIGKILL after 30 s); the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_pipes()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL: the server dies mid-call, as in a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)

    def _close_pipes(self) -> None:
        assert self.process is not None
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self._tmp.cleanup()


def _read_line(stream: IO[str] | None, timeout: float) -> str:
    import selectors

    if stream is None:
        return ""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return stream.readline()


SERVED: dict[str, str] = {}
"""The database behind each running test server, by the server's URL."""


def direct_url(url: str) -> str:
    """The database URL itself: ``url``, or the one behind the test server at ``url``."""
    return SERVED.get(url, url)
