"""A process that has imported the Engine Server once and forks a ``sagaway server`` per request.

A test server started afresh spends most of its start-up (0.5-1 s on the CI machine, against
a few milliseconds after it) importing gRPC, the server and the stores, and the ``grpc+…``
fixtures start one per test (tests/server_pool.py). So the pool asks this process instead: it
imported all of that once, and each request forks a child that runs ``python -m sagaway
server …`` itself (``runpy``, the code path of ``-m``), with the test's arguments, environment
and working directory, its stdout a pipe of the test process and its stderr the server's log.
The child is a real process of its own, killed and crashing as one; what it shares with the
others is only the imports, done before any of them (the zygote starts no thread, opens no
channel and no event loop, so forking it is safe).

The same process also runs test scripts (``Zygote.run_script``: the crash tests' applications,
killed with SIGKILL at a durable boundary and run again to recover): ``python SCRIPT ARGS``
forked the same way, with its stdout and stderr pipes of the test process.

The test process is not the child's parent, so each request has a middle process: it forks
the server, says the server's pid, waits for it and says its exit status (on the status pipe
the test process gave). ``Forked`` reads them, as a ``subprocess.Popen`` would give them.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

PRELOAD = (
    "sagaway.cli.main",
    "sagaway.cli.server",
    "sagaway.server.app",
    "sagaway.store.sqlite",
    "sagaway.store.postgres",
)
"""What every server imports: the command, the server, both stores (and through them gRPC,
psycopg and the rest)."""
_MAX_REQUEST = 1 << 20


class Forked:
    """A forked server, seen as ``subprocess.Popen`` shows a child: ``pid``, ``stdout``,
    ``poll``, ``wait``, ``send_signal``, ``kill``, ``returncode``."""

    def __init__(self, status: int, stdout: IO[str], stderr: IO[str] | None = None) -> None:
        self.stdout: IO[str] | None = stdout
        self.stderr = stderr
        """A pipe of its stderr (``Zygote.run_script``); a server's goes to its log."""
        self.returncode: int | None = None
        self._status = status
        """The status pipe (unbuffered: ``select`` must see what is left to read)."""
        self._said = b""
        pid = self._line(None)
        if pid is None:
            raise RuntimeError("the server zygote did not fork")
        self.pid = pid

    def poll(self) -> int | None:
        return self._exited(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._exited(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"sagaway server (pid {self.pid})", timeout or 0)
        return code

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Read stdout and stderr to their ends, then wait for the exit: as ``Popen``'s, with
        ``subprocess.TimeoutExpired`` when that takes longer than ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        read: dict[int, str] = {}

        def drain(index: int, stream: IO[str] | None) -> None:
            read[index] = stream.read() if stream is not None else ""

        readers = [
            threading.Thread(target=drain, args=(i, stream), daemon=True)
            for i, stream in enumerate((self.stdout, self.stderr))
        ]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(f"forked pid {self.pid}", timeout or 0)
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return read[0], read[1]

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _exited(self, timeout: float | None) -> int | None:
        if self.returncode is None:
            code = self._line(timeout)
            if code is not None:
                self.returncode = code
                os.close(self._status)
        return self.returncode

    def _line(self, timeout: float | None) -> int | None:
        """The next number the middle process says, waiting up to ``timeout`` (None: for
        ever); the end of the pipe without one (the middle process killed with the test run)
        says SIGKILL."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._said:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._status], [], [], left)[0]:
                return None
            chunk = os.read(self._status, 64)
            if not chunk:
                return -signal.SIGKILL
            self._said += chunk
        line, _, self._said = self._said.partition(b"\n")
        return int(line)


class Zygote:
    """The forking process, started on the first ``spawn``; ``close()`` ends it (its servers
    live on until stopped)."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None
        self._log = Path(tempfile.mkdtemp(prefix="sagaway-zygote-")) / "zygote.log"
        """The zygote's stderr (removed by ``close``)."""

    def spawn(self, argv: list[str], env: dict[str, str], log: Path) -> Forked:
        """Fork ``sagaway server`` with ``argv`` (its arguments after ``sagaway``) and ``env``,
        its stderr appended to ``log``; not waiting for it to listen."""
        sock = self._started()
        out_r, out_w = os.pipe()
        status_r, status_w = os.pipe()
        err = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        request = {"argv": argv, "env": env, "cwd": os.getcwd()}
        try:
            socket.send_fds(sock, [json.dumps(request).encode()], [out_w, err, status_w])
        except OSError:
            os.close(out_r)
            os.close(status_r)
            raise
        finally:
            for fd in (out_w, err, status_w):
                os.close(fd)
        stdout = os.fdopen(out_r, "r", encoding="utf-8")
        try:
            return Forked(status_r, stdout)
        except RuntimeError:
            stdout.close()
            os.close(status_r)
            raise RuntimeError(f"the server zygote did not fork: {self._log.read_text()}") from None

    def run_script(
        self, path: Path, args: list[str], env: dict[str, str], cwd: Path | None = None
    ) -> Forked:
        """Fork ``python PATH ARGS`` (``runpy.run_path``, run as ``__main__``) with ``env`` in
        ``cwd`` (default: this process's), its stdout and stderr pipes of this process
        (``Forked.communicate`` reads both)."""
        sock = self._started()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        status_r, status_w = os.pipe()
        folder = str(cwd) if cwd is not None else os.getcwd()
        request = {"script": str(path), "argv": args, "env": env, "cwd": folder}
        try:
            socket.send_fds(sock, [json.dumps(request).encode()], [out_w, err_w, status_w])
        except OSError:
            for fd in (out_r, err_r, status_r):
                os.close(fd)
            raise
        finally:
            for fd in (out_w, err_w, status_w):
                os.close(fd)
        stdout = os.fdopen(out_r, "r", encoding="utf-8")
        stderr = os.fdopen(err_r, "r", encoding="utf-8")
        try:
            return Forked(status_r, stdout, stderr)
        except RuntimeError:
            stdout.close()
            stderr.close()
            os.close(status_r)
            raise RuntimeError(f"the zygote did not fork: {self._log.read_text()}") from None

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()  # the zygote reads end-of-file and exits
            self._socket = None
        if self._process is not None:
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        shutil.rmtree(self._log.parent, ignore_errors=True)

    def _started(self) -> socket.socket:
        if self._process is not None and self._process.poll() is not None:
            self.close()  # it died (a test killed it): start another
        if self._socket is None:
            self._log.parent.mkdir(exist_ok=True)
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            with theirs, self._log.open("ab") as log:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "tests.server_zygote", str(theirs.fileno())],
                    pass_fds=[theirs.fileno()],
                    cwd=Path(__file__).resolve().parents[1],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
            self._socket = ours
        return self._socket


def _serve_requests(sock: socket.socket) -> None:
    """Fork a server for each request until the test process closes its end."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the middle processes are reaped by the kernel
    while True:
        message, fds, _flags, _addr = socket.recv_fds(sock, _MAX_REQUEST, 3)
        if not message:
            return
        if os.fork() == 0:
            sock.close()
            request, (out, err, status) = json.loads(message), fds
            _middle(status, out, err)  # returns in the server only
            _become_server(request, out, err)  # exits as the command does
        for fd in fds:
            os.close(fd)


def _middle(status: int, out: int, err: int) -> None:
    """Fork the server (which returns), then say its pid and, once it has ended, its exit
    status, and exit."""
    pid = -1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        pid = os.fork()
        if pid == 0:
            os.close(status)
            return
        os.close(out)
        os.close(err)
        os.write(status, f"{pid}\n".encode())
        _, code = os.waitpid(pid, 0)
        os.write(status, f"{os.waitstatus_to_exitcode(code)}\n".encode())
    finally:
        if pid != 0:
            os._exit(0)


def _become_server(request: dict[str, Any], out: int, err: int) -> None:
    """Run ``python -m sagaway <argv>`` in this process; it exits as that command does."""
    import runpy

    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    script = request.get("script")
    if script is not None:  # Zygote.run_script: ``python SCRIPT ARGS``
        # As an interpreter started so would have it: the script's folder, then PYTHONPATH's.
        given = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        head = [os.path.dirname(script), *given]
        sys.path[:] = head + [p for p in sys.path[1:] if p not in head]
        sys.argv = [script, *request["argv"]]
        runpy.run_path(script, run_name="__main__")
        sys.exit(0)
    sys.path[0] = request["cwd"]
    sys.argv = ["sagaway", *request["argv"]]
    runpy.run_module("sagaway", run_name="__main__", alter_sys=True)
    sys.exit(0)


if __name__ == "__main__":
    with socket.socket(fileno=int(sys.argv[1])) as requests:
        _serve_requests(requests)
