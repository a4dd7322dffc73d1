"""The Engine Server variant: ``python -m sagaway server`` as a separate process in front of the
engine database; the benchmark's Manager talks to it at ``grpc://127.0.0.1:PORT`` with a token.

One server per scenario (fresh state, like every other target), started on port 0: the real
port is read from its ``listening on HOST:PORT`` line. Stopped with SIGTERM (graceful, exit 0).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

READY = "listening on "


class EngineServer:
    """One ``sagaway server --db URL --listen 127.0.0.1:0 --token-file F`` process."""

    def __init__(self, db_url: str, workdir: Path, cprofile: Path | None = None) -> None:
        self.db_url = db_url
        self.cprofile = cprofile
        """Run the server under cProfile, stats written here when it stops (profiling only)."""
        self.log_file = workdir / "engine-server.log"
        self.token = secrets.token_urlsafe(24)
        self.token_file = workdir / "server-token"
        self.token_file.write_text(self.token + "\n")
        os.chmod(self.token_file, 0o600)
        self.address: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.exit_code: int | None = None

    @property
    def url(self) -> str:
        assert self.address is not None
        return f"grpc://{self.address}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 60.0) -> None:
        profiler = ["-m", "cProfile", "-o", str(self.cprofile)] if self.cprofile else []
        cmd = [
            sys.executable, *profiler, "-m", "sagaway", "server",
            "--db", self.db_url,
            "--listen", "127.0.0.1:0",
            "--token-file", str(self.token_file),
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        found = threading.Event()

        def read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            with self.log_file.open("wb") as log:
                for line in self.proc.stdout:
                    log.write(line)
                    log.flush()
                    text = line.decode(errors="replace").strip()
                    if not found.is_set() and text.startswith(READY):
                        self.address = text[len(READY) :]
                        found.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not found.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"sagaway server did not print {READY!r}: "
                    f"{self.log_file.read_text(errors='replace')[-2000:]}"
                )

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self.exit_code = self.proc.returncode
            return
        self.proc.send_signal(signal.SIGTERM)  # our own child, by its pid
        try:
            self.exit_code = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.exit_code = self.proc.wait(10)

    def describe(self) -> dict[str, Any]:
        return {
            "what": "sagaway server (separate process)",
            "command": "python -m sagaway server --db <engine db> --listen 127.0.0.1:0 "
            "--token-file <file>",
            "address": self.address,
            "engine_db": self.db_url.split("?")[0].rsplit("@", 1)[-1],
            "token": True,
            "tls": False,
        }
