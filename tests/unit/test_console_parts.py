"""The web console's pure parts: listen addresses and loopback, list filters, the step
timeline's geometry, the login redirect target; and ``sagaway ui``'s refusals at start."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import sagaway as sw

pytest.importorskip("starlette", reason="the [ui] extra is part of the dev install")

from sagaway.cli.main import cli
from sagaway.console import timeline
from sagaway.console.config import is_loopback, parse_listen
from sagaway.console.filters import FilterError, ListFilters, parse_when
from sagaway.console.security import safe_next

S, K = sw.StepStatus, sw.StepKind


@pytest.mark.parametrize(
    ("listen", "expected"),
    [
        ("127.0.0.1:8080", ("127.0.0.1", 8080)),
        ("[::1]:0", ("::1", 0)),
        ("localhost:9000", ("localhost", 9000)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
    ],
)
def test_parse_listen(listen: str, expected: tuple[str, int]) -> None:
    assert parse_listen(listen) == expected


@pytest.mark.parametrize("listen", ["8080", ":8080", "host:", "host:http", "host:70000"])
def test_parse_listen_refuses(listen: str) -> None:
    with pytest.raises(ValueError):
        parse_listen(listen)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("console.example.com", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_filters_round_trip_through_the_query_string() -> None:
    from urllib.parse import parse_qs

    f = ListFilters.from_query(
        {"name": " checkout ", "key_prefix": "a/b ", "since": "2h", "limit": "20"},
        ["suspended", "FAILED", "SUSPENDED"],
    )
    assert f.statuses == (sw.WorkflowStatus.SUSPENDED, sw.WorkflowStatus.FAILED)
    assert (f.name, f.key_prefix, f.limit) == ("checkout", "a/b ", 20)
    query = parse_qs(f.query(after="1.5:run"))
    assert query["status"] == ["SUSPENDED", "FAILED"] and query["after"] == ["1.5:run"]
    assert query["key_prefix"] == ["a/b "] and query["limit"] == ["20"]
    assert ListFilters.from_query({"limit": "100000"}, []).limit == 500
    with pytest.raises(FilterError, match="unknown status NOPE"):
        ListFilters.from_query({}, ["nope"])


def test_parse_when() -> None:
    assert parse_when("90s", "since", now=1000.0) == 910.0
    assert parse_when("2h", "since", now=10000.0) == 2800.0
    assert parse_when("1970-01-02", "since") == 86400.0
    assert parse_when("1970-01-01T01:00+01:00", "since") == 0.0
    with pytest.raises(FilterError, match="since"):
        parse_when("last tuesday", "since")


def _step(n: int, start: float, end: float | None, **kw: object) -> sw.StepDescription:
    fields: dict[str, object] = {"kind": K.ACTIVITY, "status": S.COMPLETED, **kw}
    return sw.StepDescription(
        call_id=str(n), name=f"s{n}", attempts=1, error=None, started_at=start, ended_at=end,
        **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def _workflow(steps: list[sw.StepDescription], ended_at: float | None) -> sw.WorkflowDescription:
    return sw.WorkflowDescription(
        key="k", run_id="r", name="w", status=sw.WorkflowStatus.FAILED, result=None, error=None,
        parent_key=None, created_at=100.0, updated_at=110.0, ended_at=ended_at, owner=None,
        next_run_at=None, suspend_count=0, steps=steps,
    )  # fmt: skip


def test_timeline_places_steps_on_the_workflow_axis() -> None:
    d = _workflow(
        [
            _step(1, 100.0, 102.0),
            _step(2, 102.0, 106.0, status=S.FAILED),
            _step(3, 106.0, 110.0, kind=K.COMPENSATION),
        ],
        ended_at=110.0,
    )
    t = timeline.build(d, now=500.0)
    assert t.span == 10.0 and t.ticks == [0.0, 2.5, 5.0, 7.5, 10.0]
    assert [(b.left, b.width) for b in t.bars] == [(0.0, 20.0), (20.0, 40.0), (60.0, 40.0)]
    assert [b.compensation for b in t.bars] == [False, False, True]
    assert not any(b.open for b in t.bars)


def test_timeline_draws_open_steps_up_to_now_and_instant_ones_visibly() -> None:
    d = _workflow(
        [
            _step(1, 100.0, 100.0),  # took no time
            _step(2, 101.0, 4000.0, kind=K.SIGNAL, status=S.WAITING),  # deadline, not an end
        ],
        ended_at=None,
    )
    t = timeline.build(d, now=104.0)
    assert t.span == 4.0
    first, waiting = t.bars
    assert first.width == timeline.MIN_WIDTH and not first.open
    assert (waiting.left, waiting.width, waiting.open) == (25.0, 75.0, True)


@pytest.mark.parametrize(
    ("target", "safe"),
    [
        ("/workflows/a%2Fb?x=1", "/workflows/a%2Fb?x=1"),
        ("//evil.example/", "/"),
        ("https://evil.example/", "/"),
        ("/\\evil.example", "/"),
        (None, "/"),
    ],
)
def test_login_goes_back_to_local_pages_only(target: str | None, safe: str) -> None:
    assert safe_next(target) == safe


def test_ui_refuses_to_listen_beyond_loopback_without_a_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SAGAWAY_UI_TOKEN", raising=False)
    result = CliRunner().invoke(cli, ["ui", "--db", "sqlite:///x.db", "--listen", "0.0.0.0:0"])
    assert result.exit_code == 2
    assert "refusing to serve on 0.0.0.0:0 without a token" in result.output


def test_ui_refuses_bad_options(tmp_path: Path) -> None:
    runner = CliRunner()
    bad_listen = runner.invoke(cli, ["ui", "--db", "sqlite:///x.db", "--listen", "nowhere"])
    assert bad_listen.exit_code == 2 and "HOST:PORT" in bad_listen.output
    bad_url = runner.invoke(cli, ["ui", "--db", "mysql://x/y"])
    assert bad_url.exit_code == 2 and "unsupported database URL" in bad_url.output
    empty = tmp_path / "token"
    empty.write_text("\n", encoding="utf-8")
    no_token = runner.invoke(cli, ["ui", "--db", "sqlite:///x.db", "--token-file", str(empty)])
    assert no_token.exit_code == 2 and "is empty" in no_token.output


def test_ui_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn raises ImportError
    result = CliRunner().invoke(cli, ["ui", "--db", "sqlite:///x.db"])
    assert result.exit_code == 2
    assert "pip install 'sagaway[ui]'" in result.output
    assert len(result.output.strip().splitlines()) == 1
