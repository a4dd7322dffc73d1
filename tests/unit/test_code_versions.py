"""Checking code versions: ``Manager(version=..., run_versions=...)``, ``$SAGAWAY_CODE_VERSION``
and the ``--versions`` list of the CLI (no database: the Manager checks them when made)."""

from __future__ import annotations

import pytest

import sagaway as sw
from sagaway._engine import versions


def _manager(**options: object) -> sw.Manager:
    return sw.Manager("sqlite:///unused.db", **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "non-empty"),
        (" v1", "surrounding spaces"),
        ("v" * 101, "too long"),
        ("v1\n", "surrounding spaces"),
        ("v\x001", "control characters"),
        ("v\x7f1", "control characters"),
        ("v1,v2", "commas"),
        ("unversioned", "reserved"),
    ],
)
def test_a_bad_version_is_refused(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _manager(version=value)


def test_a_version_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(TypeError, match="must be a string"):
        _manager(version=2026)


def test_the_version_is_kept_and_a_hundred_characters_are_allowed() -> None:
    assert _manager(version="2026.12.1").version == "2026.12.1"
    assert _manager(version="v" * 100).version == "v" * 100
    assert _manager(version="rel 7 ünïcode").version == "rel 7 ünïcode"


def test_the_default_version_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(versions.ENV_VAR, raising=False)
    assert _manager().version is None
    monkeypatch.setenv(versions.ENV_VAR, "")
    assert _manager().version is None
    monkeypatch.setenv(versions.ENV_VAR, "from-env")
    assert _manager().version == "from-env"
    assert _manager(version="explicit").version == "explicit"
    monkeypatch.setenv(versions.ENV_VAR, "a,b")
    with pytest.raises(ValueError, match=r"\$SAGAWAY_CODE_VERSION 'a,b' must not contain commas"):
        _manager()


def test_run_versions_are_checked() -> None:
    assert _manager().run_versions is None
    assert _manager(run_versions=["v1", None]).run_versions == frozenset({"v1", None})
    with pytest.raises(ValueError, match="at least one version"):
        _manager(run_versions=set())
    with pytest.raises(TypeError, match="collection of versions"):
        _manager(run_versions="v1")
    with pytest.raises(ValueError, match="commas"):
        _manager(run_versions={"v1,v2"})


def test_the_cli_list_of_versions() -> None:
    assert versions.parse_versions("v1, v2") == frozenset({"v1", "v2"})
    assert versions.parse_versions("unversioned,v2") == frozenset({None, "v2"})
    for bad in ("", " , ", "v1,", ",v1"):
        with pytest.raises(ValueError, match="comma-separated"):
            versions.parse_versions(bad)
    with pytest.raises(ValueError, match="too long"):
        versions.parse_versions("v" * 101)
