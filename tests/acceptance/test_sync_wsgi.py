"""A threaded WSGI server calls sagas through one shared SyncClient while a `sagaway worker`
process runs them: many concurrent HTTP requests, each answered with its own saga's result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.long  # starts real processes: run by `pytest -m long`

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.acceptance.sync_wsgi_app"


def _get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def site(db_url: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The web process (its base URL) and the worker process, on one database."""
    env = {
        **os.environ,
        "SYNC_DB_URL": db_url,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
    }
    worker = subprocess.Popen(
        [sys.executable, "-m", "sagaway", "worker", f"{APP}:manager", "--drain", "1"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    web = subprocess.Popen(
        # Imported, not run as __main__: its error classes must be the ones the worker records.
        [sys.executable, "-c", f"from {APP} import main; main()"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert web.stdout is not None
        line = web.stdout.readline()  # blocks until the server prints (or dies: "")
        assert line.startswith("listening on "), (line, web.stderr and web.stderr.read())
        yield f"http://127.0.0.1:{line.split()[-1]}", worker
    finally:
        for proc in (web, worker):
            proc.terminate()
        for proc in (web, worker):
            try:
                proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


@pytest.mark.slow
def test_concurrent_requests_each_get_their_sagas_result(
    site: tuple[str, subprocess.Popen[str]],
) -> None:
    base, worker = site
    requests: list[tuple[str, Any]] = []
    for i in range(16):
        requests.append((f"/quote?sku=tea&qty={i}&key=q-{i}", ("quote", i)))
    for i in range(4):  # a client retry: the same key and arguments join the same saga
        requests.append((f"/quote?sku=tea&qty={i}&key=q-{i}", ("quote", i)))
    for i in range(6):
        requests.append((f"/by-name?sku=mug&qty={i}&key=n-{i}", ("by-name", i)))
    for i in range(4):
        requests.append((f"/refuse?sku=s{i}&key=r-{i}", ("refuse", i)))

    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        answers = list(pool.map(lambda r: _get(base + r[0]), requests))

    for (_, (route, i)), (status, body) in zip(requests, answers, strict=True):
        if route == "quote":
            assert status == 200, body
            # Decoded into the registered return type in the web process, then sent as JSON.
            assert body == {
                "type": "Receipt",
                "receipt": {"sku": "tea", "qty": i, "total": 7 * i, "worker_pid": worker.pid},
            }
        elif route == "by-name":
            assert status == 200, body
            # A names-only client gets the worker's JSON as it is.
            assert body == {
                "type": "dict",
                "receipt": {"sku": "mug", "qty": i, "total": 3 * i, "worker_pid": worker.pid},
            }
        else:
            assert (status, body) == (409, {"error": f"no s{i} left", "type": "OutOfStock"})
