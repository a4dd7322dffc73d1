"""`sagaway list` and `sagaway show` read without the engine (``sagaway.reading``), so that they
start quickly: a run of each imports none of the execution machinery, and the reader answers
as the Manager does, on every backend."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import sagaway as sw
from sagaway import codecs
from sagaway.cli import _support
from sagaway.reading import open_reader

_MODULES_OF_A_RUN = """
import contextlib, io, json, runpy, sys
sys.argv = ["sagaway", *sys.argv[1:]]
with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()):
    try:
        runpy.run_module("sagaway", run_name="__main__")
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""

_ENGINE = (
    "sagaway.manager",
    "sagaway._engine.engine",
    "sagaway._engine.execution",
    "sagaway._engine.executor",
    "sagaway._engine.opening",
    "sagaway._engine.options",
    "sagaway.recovery",
    "sagaway.worker",
    "sagaway.workflow",
    "opentelemetry",
    "prometheus_client",
)
"""What reading a page or a workflow has no use for (the engine, its options' pydantic, the
telemetry its Manager sets up)."""

_STORE_UNUSED = (
    *(
        f"sagaway.store.{dialect}.{module}"
        for dialect in ("sqlite", "postgres")
        for module in ("schedules", "queue_limits", "fork", "purge", "claims", "create", "waits")
        if (dialect, module) != ("sqlite", "claims")  # tiny, and imported with the store
    ),
    "sagaway.store.postgres.listener",
    "sagaway.store._fork",
    "sagaway.store._purge",
    "sagaway.store._queue_limits",
    "sagaway.store._schedules",
)
"""What a store opened to read does not use: the collaborators it builds on first use
(``store._collaborators``) and the modules its writing verbs import when they run."""


def _build(url: str) -> sw.Manager:
    m = sw.Manager(url, poll_interval=0.05)

    @m.register_activity(name="double")
    def double(x: int) -> int:
        return 2 * x

    @m.register_workflow(name="twice")
    async def twice(x: int) -> dict[str, int]:
        return {"x": x, "doubled": await double(x)}

    return m


@pytest.fixture
async def filled(db_url: str) -> str:
    m = _build(db_url)
    async with m:
        for i in range(3):
            await m.workflow("twice", i).execute_get(idempotency_key=f"k-{i}")
    return db_url


def _run(*args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _MODULES_OF_A_RUN, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, object] = json.loads(done.stdout)
    return seen


@pytest.mark.parametrize("command", [["list"], ["list", "--json"], ["show", "k-1"]])
def test_list_and_show_import_no_engine(filled: str, command: list[str]) -> None:
    seen = _run(command[0], "--db", filled, *command[1:])
    assert seen["code"] == 0
    assert "k-1" in str(seen["out"])  # it read the workflow, and printed it
    modules = seen["modules"]
    assert isinstance(modules, list)
    loaded = [m for m in modules if m.startswith(_ENGINE)]
    assert loaded == []
    # pydantic itself (its models, the engine's adapters); pydantic_core reads stored JSON
    assert [m for m in modules if m == "pydantic" or m.startswith("pydantic.")] == []
    assert [m for m in modules if m in _STORE_UNUSED] == []
    if not filled.startswith("grpc"):  # the Engine Server's client listens (a Watch stream)
        assert "sagaway.store.notices" not in modules  # the store's listen() alone needs it


async def test_the_reader_answers_as_the_manager(filled: str) -> None:
    m = _build(filled)
    async with m.connect(create=False), open_reader(filled) as reader:
        assert await reader.list_workflows() == await m.list_workflows()
        assert await reader.list_workflows(status="COMPLETED", key_prefix="k-", limit=2) == (
            await m.list_workflows(status="COMPLETED", key_prefix="k-", limit=2)
        )
        assert await reader.describe("k-1") == await m.get_workflow("k-1").describe()
        with pytest.raises(sw.WorkflowNotFound):
            await reader.describe("nowhere")


def test_the_cli_knows_the_codec_keys_variable_without_importing_the_codecs() -> None:
    assert _support.KEYS_ENV == codecs.KEYS_ENV
