"""Code versions on the command line (SQLite and PostgreSQL): ``sagaway list --version``, the
version in ``list`` and ``show`` (text and JSON), and ``sagaway worker --versions`` (exit 2 on a
bad list)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import sagaway as sw
from sagaway.cli import worker as cli_worker
from sagaway.cli.main import cli
from tests.integration.test_cli import APP, sagaway

SEEDED = {"blue-1": "v1", "blue-2": "v1", "green-1": "2026.12.1", "plain-1": None}


@pytest.fixture
async def versioned(db_url: str) -> str:
    """PENDING workflows created by processes of versions v1 and 2026.12.1, and unversioned."""
    for key, version in SEEDED.items():
        m = sw.Manager(db_url, version=version)

        @m.register_workflow(name="ok")
        async def ok(x: Any = None) -> Any:
            return x

        async with m.connect():
            await m.workflow("ok", key).execute(idempotency_key=key)
    return db_url


async def _listed(db_url: str, *args: str) -> list[dict[str, Any]]:
    result = await sagaway("list", "--db", db_url, "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


async def test_list_filters_by_version_and_shows_it(versioned: str) -> None:
    rows = await _listed(versioned)
    assert {r["key"]: r["code_version"] for r in rows} == SEEDED
    assert sorted(r["key"] for r in await _listed(versioned, "--version", "v1")) == [
        "blue-1",
        "blue-2",
    ]
    assert [r["key"] for r in await _listed(versioned, "--version", "unversioned")] == ["plain-1"]
    both = await _listed(versioned, "--version", "2026.12.1,unversioned")
    assert sorted(r["key"] for r in both) == ["green-1", "plain-1"]
    assert await _listed(versioned, "--version", "v9") == []
    text = await sagaway("list", "--db", versioned, "--version", "2026.12.1")
    assert text.exit_code == 0, text.output
    assert "version" in text.output and "2026.12.1" in text.output and "blue-1" not in text.output


async def test_list_refuses_a_bad_version(versioned: str) -> None:
    for value in ("", " , ", "v1,,v2", "x" * 101):
        result = await sagaway("list", "--db", versioned, "--version", value)
        assert result.exit_code == 2, (value, result.output)
        assert "--version" in result.output


async def test_show_prints_the_code_version(versioned: str) -> None:
    result = await sagaway("show", "green-1", "--db", versioned)
    assert result.exit_code == 0, result.output
    assert "version  2026.12.1" in result.output
    result = await sagaway("show", "plain-1", "--db", versioned)
    assert "version  unversioned" in result.output
    data = json.loads((await sagaway("show", "blue-1", "--db", versioned, "--json")).output)
    assert data["code_version"] == "v1"
    data = json.loads((await sagaway("show", "plain-1", "--db", versioned, "--json")).output)
    assert data["code_version"] is None


@pytest.mark.parametrize("value", ["", " , ", "v1,", "a" * 101, "v\x01"])
def test_worker_refuses_a_bad_versions_list(value: str) -> None:
    result = CliRunner().invoke(cli, ["worker", APP, "--versions", value])
    assert result.exit_code == 2, result.output
    assert "--versions" in result.output


def test_worker_runs_the_versions_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[sw.Manager] = []
    monkeypatch.setattr(cli_worker, "_serve", lambda manager, *a, **kw: served.append(manager))
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    result = CliRunner().invoke(cli, ["worker", APP, "--db", url, "--versions", "v2,unversioned"])
    assert result.exit_code == 0, result.output
    [manager] = served
    assert manager.run_versions == frozenset({"v2", None})
