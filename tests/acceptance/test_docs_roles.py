"""docs/security.md's "Roles": its tokens file example is a valid file that means what the page
says, and its matrix tables are the server's and the console's tables, row by row."""

from __future__ import annotations

import re
from pathlib import Path

from sagaway import credentials
from sagaway.console import access
from sagaway.principals import Principal, Role
from sagaway.server import roles
from sagaway.v1 import engine_pb2 as pb

PAGE = Path(__file__).resolve().parents[2] / "docs" / "security.md"
COLUMNS = [Role.READ, Role.OPERATE, Role.WORKER, Role.ADMIN]


def _section(title: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def _table_rows(section: str, first_header: str) -> list[list[str]]:
    lines = section.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[at + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_tokens_file_example_is_valid_and_names_who_the_page_says(tmp_path: Path) -> None:
    section = _section("Roles")
    example = re.search(r"```toml\n(.*?)```", section, re.S)
    assert example is not None
    secret = tmp_path / "billing-workers"
    secret.write_text("billing-token\n")
    text = example.group(1).replace("/run/secrets/billing-workers", str(secret))
    found = credentials.parse(text)
    assert found.by_token("dashboard-example-token") == Principal(
        "dashboard", frozenset({Role.READ})
    )
    assert found.by_token("alice-example-token") == Principal(
        "alice", frozenset({Role.OPERATE, Role.ADMIN})
    )
    assert found.by_token("billing-token") == Principal("billing-workers", frozenset({Role.WORKER}))
    assert found.by_certificate("CN=worker-1,O=Acme", "worker-1") == Principal(
        "worker-1", frozenset({Role.WORKER})
    )


def _judged(rpc: str, request: object = None) -> list[str]:
    return [
        "✓" if roles.refusal(Principal("p", frozenset({role})), rpc, request) is None else ""
        for role in COLUMNS
    ]


def test_the_rpc_matrix_on_the_page_is_the_servers_table() -> None:
    rows = _table_rows(_section("Roles"), "RPC")
    listed: set[str] = set()
    for cells in rows:
        names = re.findall(r"`(\w+)`", cells[0])
        marks = cells[1:]
        if "replace_live" in cells[0]:
            assert marks == _judged("CreateWorkflow", pb.CreateWorkflowRequest(replace_live=True))
            continue
        if "a `lease`" in cells[0]:
            lease = pb.Lease(token="t", owner="o", expires_at=1.0)
            assert marks == _judged("CreateWorkflow", pb.CreateWorkflowRequest(lease=lease))
            continue
        for rpc in names:
            assert rpc in roles.RPC_ROLES, rpc
            assert marks == _judged(rpc), rpc
            listed.add(rpc)
    assert listed == set(roles.RPC_ROLES)


def test_the_console_matrix_on_the_page_is_the_consoles_table() -> None:
    rows = _table_rows(_section("Roles"), "console")
    seen: set[str] = set()
    for cells in rows[1:]:
        for action in re.findall(r"\w+", cells[0]):
            needed = access.ACTION_ROLES[action]
            expected = ["✓" if Principal("p", frozenset({r})).may(needed) else "" for r in COLUMNS]
            assert cells[1:] == expected, action
            seen.add(action)
    assert rows[0][1:] == ["✓"] * 4  # every role sees the pages
    assert seen == set(access.ACTION_ROLES)
