"""The README's examples run as written."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import sagaway as sw
from sagaway.testing import FakeClock, time_skipping_manager

pytestmark = pytest.mark.long  # runs documented examples in subprocesses (CI runs them)

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SAGAWAY_DATABASE_URL"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    return env


def test_quickstart_matches_the_readme_and_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    example = (ROOT / "examples" / "quickstart.py").read_text()
    code = example.split("\n", 1)[1]  # after the provenance comment
    assert f"```python\n{code}```" in readme
    for _ in range(2):  # the second run attaches to the finished order-1: nothing runs again
        out = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "quickstart.py")],
            cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60, check=True,
        ).stdout  # fmt: skip
        assert out == "failed and compensated: [DECLINED] card declined\n"
    show = subprocess.run(
        [sys.executable, "-m", "sagaway", "show", "order-1", "--json"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert '"status": "FAILED"' in show and '"kind": "compensation"' in show


def test_demo_runs_on_the_embedded_default(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sagaway", "demo"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    out = result.stdout
    assert (tmp_path / "sagaway.db").exists()
    assert out.count("COMPLETED") >= 4 and "FAILED" in out
    # compensations in reverse order: points before balance
    assert out.index("points.cancel") < out.index("balance.cancel")
    listed = subprocess.run(
        [sys.executable, "-m", "sagaway", "list", "--jsonl"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    statuses = sorted(line.split('"status": "')[1].split('"')[0] for line in listed.splitlines())
    assert statuses == ["COMPLETED", "FAILED"]


def _load(name: str) -> Any:
    path = ROOT / "examples" / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module's annotations
    spec.loader.exec_module(module)
    return module


async def test_ekyc_waits_for_the_reviewer_and_times_out(db_url: str) -> None:
    ekyc = _load("ekyc")
    clock = FakeClock()
    manager = time_skipping_manager(db_url, clock)
    accounts: dict[str, str] = {}
    review = ekyc.build(manager, accounts)
    async with manager:
        approved = await manager.workflow(review, ekyc.Application("alice", "DOC-1")).execute()
        ignored = await manager.workflow(review, ekyc.Application("carol", "DOC-3")).execute()
        await manager.signal("approval").send(approved.key, ekyc.Approval(True, "rin"))
        assert await clock.run_until(approved.result()) == "active (approved by rin)"
        with pytest.raises(ekyc.KycRejected, match="no decision in 3 days"):
            await clock.run_until(ignored.result())
        with pytest.raises(ekyc.KycRejected) as bad:
            await manager.workflow(review, ekyc.Application("bob", "scan.jpg")).execute_get()
    assert bad.value.code == "BAD_DOCUMENT"
    assert accounts == {
        "alice": "active (approved by rin)",
        "carol": "rejected: no decision in 3 days",
    }


async def test_line_activation_answers_before_the_child_publishes(db_url: str) -> None:
    line = _load("line_activation")
    clock = FakeClock()
    manager = time_skipping_manager(db_url, clock)
    backend = line.Backend(broker_up=False)
    activate = line.build(manager, backend)
    async with manager:
        answer = await manager.workflow(activate, line.Activation("080", "5G")).execute_get(
            idempotency_key="act-1"
        )
        assert answer == "activation of 080 accepted"
        assert backend.events == {}  # the broker is down: the child keeps retrying on its own
        backend.broker_up = True
        await clock.run_until(manager.get_workflow("act-1/2").result())
    # the child "act-1/2" derives its keys from its escaped key: "act-1%2F2/<call id>"
    assert backend.events == {"act-1%2F2/1": "LineActivated 080"}


async def test_checkout_compensates_in_reverse_when_the_partner_refuses(db_url: str) -> None:
    checkout_app = _load("checkout_postgres")
    manager = sw.Manager(db_url, poll_interval=0.05)
    svc = checkout_app.Services()
    checkout = checkout_app.build(manager, svc)
    amount = Decimal("10")
    async with manager:
        ok = checkout_app.Checkout("o-1", "alice", "WELCOME10", amount, "JP")
        assert await manager.workflow(checkout, ok).execute_get(idempotency_key="o-1") == "P-o-1"
        assert svc.coupons["WELCOME10"] == "used by o-1"
        svc.coupons["WELCOME10"] = "unused"
        refused = checkout_app.Checkout("o-2", "bob", "WELCOME10", amount, "XX")
        with pytest.raises(checkout_app.PartnerRefused):
            await manager.workflow(checkout, refused).execute_get(idempotency_key="o-2")
        steps = (await manager.get_workflow("o-2").describe()).steps
    assert svc.orders == {"o-1": "CONFIRMED", "o-2": "CANCELLED"}
    assert svc.coupons["WELCOME10"] == "unused"
    compensations = [s.name for s in steps if s.kind is sw.StepKind.COMPENSATION]
    assert compensations == ["checkout.cancel_order", "checkout.restore_coupon"]
    assert len(svc.notifications) == 1


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ("", "result: Your trip to Lisbon is booked.\n"),
        ("--reject", "failed and compensated: [REJECTED] tool 'book_car' was rejected\n"),
    ],
)
def test_travel_agent_runs_offline_as_its_readme_says(tmp_path: Path, flag: str, said: str) -> None:
    readme = (ROOT / "examples" / "travel_agent" / "README.md").read_text()
    assert "python examples/travel_agent/app.py" in readme
    env = {k: v for k, v in _env().items() if k != "SAGAWAY_AGENT_MODEL"}  # the scripted model
    command = [sys.executable, str(ROOT / "examples" / "travel_agent" / "app.py")]
    out = subprocess.run(
        [*command, *([flag] if flag else []), "--db", f"sqlite:///{tmp_path}/travel.db"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    lines = out.splitlines(keepends=True)
    assert lines[0].startswith("waiting for approval: {'tool': 'book_car'")
    assert lines[1] == said
    ledger = "book flight Lisbon, book hotel Lisbon"
    if flag:
        ledger += ", cancel hotel Lisbon, cancel flight Lisbon"
    else:
        ledger += ", book car Lisbon"
    assert lines[2] == f"ledger: {ledger}\n"
