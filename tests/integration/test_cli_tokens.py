"""``sagaway token new|check``, and ``sagaway ui --tokens-file`` (a bad file is exit 2 with
one line; SIGHUP reloads it in a running console)."""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

import sagaway as sw
from sagaway import credentials
from sagaway.cli.main import cli
from sagaway.principals import Principal, Role
from tests.integration.server_support import PYTHON, ROOT, child_env


def test_token_new_prints_the_entry_on_stdout_and_the_token_on_stderr() -> None:
    result = CliRunner().invoke(cli, ["token", "new", "--name", "dash", "--role", "read"])
    assert result.exit_code == 0, result.output
    token = result.stderr.strip().rsplit(": ", 1)[1]
    assert "shown once" in result.stderr
    found = credentials.parse(result.stdout)
    assert found.by_token(token) == Principal("dash", frozenset({Role.READ}))
    assert token not in result.stdout  # the entry holds its digest only


def test_token_new_out_writes_a_private_file_once(tmp_path: Path) -> None:
    out = tmp_path / "dash.token"
    args = ["token", "new", "--name", "ops", "--role", "operate", "--role", "admin"]
    result = CliRunner().invoke(cli, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert os.stat(out).st_mode & 0o777 == 0o600
    found = credentials.parse(result.stdout)
    assert found.by_token(out.read_text().strip()) == Principal(
        "ops", frozenset({Role.OPERATE, Role.ADMIN})
    )
    again = CliRunner().invoke(cli, [*args, "--out", str(out)])
    assert again.exit_code == 2 and "cannot create" in again.stderr


def test_token_new_and_check_refuse_bad_input(tmp_path: Path) -> None:
    runner = CliRunner()
    bad_role = runner.invoke(cli, ["token", "new", "--name", "x", "--role", "reader"])
    assert bad_role.exit_code == 2 and "'reader' is not one of" in bad_role.output
    bad_name = runner.invoke(cli, ["token", "new", "--name", "a\x1bb", "--role", "read"])
    assert bad_name.exit_code == 2 and "no controls" in bad_name.stderr
    path = tmp_path / "t.toml"
    path.write_text(credentials.toml_entry("w", [Role.WORKER], credentials.digest("t")))
    checked = runner.invoke(cli, ["token", "check", str(path)])
    assert checked.exit_code == 0 and checked.stdout == "w: worker\n"
    path.write_text("[[token]]\nname = 'w'\nroles = ['worker']\n")
    broken = runner.invoke(cli, ["token", "check", str(path)])
    assert broken.exit_code == 2
    assert broken.stderr.strip().splitlines() == [
        f"error: {path}: [[token]] #1 ('w'): give exactly one of 'sha256' (hex SHA-256 of the "
        "token) and 'token_file'"
    ]


def test_ui_refuses_a_bad_tokens_file(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text("[[token]]\nname = 'x'\nroles = ['nope']\nsha256 = '" + "0" * 64 + "'\n")
    result = CliRunner().invoke(
        cli, ["ui", "--db", f"sqlite:///{tmp_path}/x.db", "--tokens-file", str(path)]
    )
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "unknown role 'nope'" in result.stderr


async def _create(url: str) -> None:
    async with sw.Manager(url).connect():
        pass


def _status(base: str, token: str) -> int:
    request = urllib.request.Request(
        base + "/", headers={"Authorization": f"Bearer {token}", "Accept": "text/plain"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.slow
def test_ui_reloads_its_tokens_file_on_sighup(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(credentials.toml_entry("a", [Role.READ], credentials.digest("token-a")))
    db = f"sqlite:///{tmp_path}/db.sqlite"
    asyncio.run(_create(db))  # the console opens an existing database only
    options = ["--db", db, "--listen", "127.0.0.1:0", "--tokens-file", str(path)]
    process = subprocess.Popen(
        [PYTHON, "-m", "sagaway.cli.main", "ui", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
        cwd=ROOT,
    )
    lines: queue.Queue[str] = queue.Queue()

    def drain() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)

    threading.Thread(target=drain, daemon=True).start()

    def stderr_line(text: str) -> str:
        while True:
            line = lines.get(timeout=30)  # queue.Empty: the console never said it
            if text in line:
                return line

    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert ready.startswith("listening on http://"), ready
        base = ready.removeprefix("listening on ").strip()
        assert _status(base, "token-a") == 200
        assert _status(base, "token-b") == 401
        path.write_text(credentials.toml_entry("b", [Role.READ], credentials.digest("token-b")))
        process.send_signal(signal.SIGHUP)
        assert "1 token, 0 certificates" in stderr_line("tokens file reloaded")
        assert _status(base, "token-b") == 200
        assert _status(base, "token-a") == 401
        path.write_text("not toml [")
        process.send_signal(signal.SIGHUP)
        assert "not TOML" in stderr_line("NOT reloaded")
        assert _status(base, "token-b") == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
