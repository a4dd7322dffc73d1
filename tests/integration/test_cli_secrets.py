"""Secrets the CLI is handed (issue 33, minor findings): a token or key file open to its group
or others is named in a warning, and a database URL whose password holds an unencoded ``@``
is refused without any part of the password in the error."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import sagaway as sw
from sagaway.cli._support import mask_url, read_token
from sagaway.cli.main import cli
from sagaway.codecs import Encrypt

PASSWORD = "s3cr@tTail"


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"

    async def create() -> None:
        async with sw.Manager(url).connect():
            pass

    asyncio.run(create())
    return url


def _secret(path: Path, text: str, mode: int) -> Path:
    path.write_text(text)
    os.chmod(path, mode)
    return path


@pytest.mark.skipif(os.name == "nt", reason="POSIX file modes")
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_open_token_and_key_files_are_named_in_a_warning(
    tmp_path: Path, sqlite_url: str, mode: int, capsys: pytest.CaptureFixture[str]
) -> None:
    token = _secret(tmp_path / "token", "s3cret\n", mode)
    assert read_token(token, "UNUSED_ENV") == "s3cret"
    warned = capsys.readouterr().err
    assert f"token file '{token}' is open to its group or others (mode {mode:04o})" in warned
    assert "chmod 600" in warned and "s3cret" not in warned

    keys = _secret(tmp_path / "keys", Encrypt.generate_key() + "\n", mode)
    result = CliRunner().invoke(cli, ["list", "--db", sqlite_url, "--codec-key-file", str(keys)])
    assert result.exit_code == 0, result.output
    assert f"codec key file '{keys}' is open to its group or others" in result.stderr
    assert "warning" not in result.stdout


@pytest.mark.skipif(os.name == "nt", reason="POSIX file modes")
def test_private_files_give_no_warning(
    tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    token = _secret(tmp_path / "token", "s3cret\n", 0o600)
    assert read_token(token, "UNUSED_ENV") == "s3cret"
    assert capsys.readouterr().err == ""
    keys = _secret(tmp_path / "keys", Encrypt.generate_key() + "\n", 0o400)
    result = CliRunner().invoke(cli, ["list", "--db", sqlite_url, "--codec-key-file", str(keys)])
    assert result.exit_code == 0 and result.stderr == ""


@pytest.mark.parametrize(
    "command", [["list"], ["count"], ["show", "k"], ["ui", "--listen", "127.0.0.1:0"]]
)
def test_a_password_with_an_unencoded_at_never_shows_in_an_error(command: list[str]) -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql://user:{PASSWORD}@127.0.0.1:5432/test"
    result = CliRunner().invoke(cli, [*command, "--db", url])
    assert result.exit_code == 2, result.output
    assert "unencoded '@'" in result.output and "%40" in result.output
    for part in ("s3cr", "tTail"):
        assert part not in result.output


async def test_the_api_refuses_it_without_showing_it_either() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(ValueError, match="unencoded '@'") as caught:
        async with sw.Manager(f"postgresql://user:{PASSWORD}@127.0.0.1:5432/test").connect():
            pass
    assert "s3cr" not in str(caught.value) and "tTail" not in str(caught.value)


def test_mask_url_hides_a_password_up_to_the_last_at() -> None:
    masked = mask_url(f"postgresql://user:{PASSWORD}@host/db")
    assert masked == "postgresql://user:***@host/db"
    assert mask_url("postgresql://u:pw@h/db?sslcert=/a@b") == "postgresql://u:***@h/db?sslcert=/a@b"


@pytest.mark.skipif(os.name == "nt", reason="POSIX file modes")
def test_an_open_tls_key_is_named_in_a_warning_by_the_server(tmp_path: Path) -> None:
    key = _secret(tmp_path / "server.key", "-----BEGIN PRIVATE KEY-----\n", 0o644)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    result = CliRunner().invoke(cli, ["server", "--db", url, "--tls-key", str(key)])
    assert result.exit_code == 2  # a key without its certificate: refused after the warning
    assert f"TLS key '{key}' is open to its group or others (mode 0644)" in result.stderr
