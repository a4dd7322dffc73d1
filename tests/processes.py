"""Real processes for the crash tests: `sagaway worker` processes and helper scripts started
from the repository root with an application's environment, waited for, and stopped.

The tests that kill a process with SIGKILL (priority, fairness, per-key order, cluster-wide
limits) share these rather than each keeping its own launcher::

    env = app_env(PRIORITY_DB_URL=db_url, PRIORITY_LOG=str(log))
    with running(worker(env, "tests.acceptance.priority_app:manager", concurrency=1)) as w:
        await until(lambda: marker.exists(), 60)
        w[0].send_signal(signal.SIGKILL)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.server_zygote import Forked, Zygote

ROOT = Path(__file__).resolve().parents[1]
"""The repository root: the processes' working directory, on their PYTHONPATH."""

Process = subprocess.Popen[bytes]
Script = subprocess.Popen[str] | Forked
"""A script's process (``script``): started or forked, with text stdout and stderr pipes."""


def app_env(**variables: str) -> dict[str, str]:
    """This process's environment with ``variables`` and the repository root (and this
    interpreter's path) on PYTHONPATH, so a process imports ``tests.acceptance.*`` apps."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # and this process imports them alike
    return {
        **os.environ,
        **variables,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
    }


def spawn(env: dict[str, str], *args: str, stdout: int = subprocess.DEVNULL) -> Process:
    """``python ARGS`` from the repository root (stderr kept for the failure message)."""
    return subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, env=env, stdout=stdout, stderr=subprocess.PIPE
    )


_zygote: Zygote | None = None


def script(path: Path, args: list[str], env: dict[str, str]) -> Script:
    """``python PATH ARGS`` with ``env`` (stdout and stderr pipes, text): forked from a process
    that has imported Sagaway once (tests/server_zygote.py), which spares each start the
    interpreter's start-up and imports (a crash app reached its first boundary after 0.30-0.42 s
    of CPU started afresh, 0.10-0.15 s forked); still a real process of its own,
    killed with SIGKILL as one. ``SAGAWAY_TEST_FORK_SERVERS=0``: an interpreter of its own."""
    global _zygote
    if os.environ.get("SAGAWAY_TEST_FORK_SERVERS", "1") == "0":
        return subprocess.Popen(
            [sys.executable, str(path), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
    if _zygote is None:
        _zygote = Zygote()
    return _zygote.run_script(path, args, env)


def close_zygote() -> None:
    """End the scripts' zygote (at the end of the session; the scripts it forked live on)."""
    global _zygote
    if _zygote is not None:
        _zygote.close()
        _zygote = None


def worker(env: dict[str, str], target: str, *, concurrency: int | None = None) -> Process:
    """A ``sagaway worker TARGET`` process (``module:manager``)."""
    options = [] if concurrency is None else ["--concurrency", str(concurrency)]
    return spawn(env, "-m", "sagaway", "worker", *options, target)


def stop(processes: list[Process], timeout: float = 60) -> None:
    """SIGTERM those still running (a worker drains and exits) and reap them all."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        process.communicate(timeout=timeout)


@contextlib.contextmanager
def running(*processes: Process) -> Iterator[list[Process]]:
    """The processes as a list (a test may append more), all stopped on the way out."""
    started = list(processes)
    try:
        yield started
    finally:
        stop(started)


async def until(check: Callable[[], object], timeout: float, every: float = 0.05) -> None:
    """Poll ``check`` (every 50 ms) until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(every)


def process_of(processes: list[Process], marker: Path) -> Process:
    """The process whose id a marker file holds."""
    return next(p for p in processes if str(p.pid) == marker.read_text())
