"""The order lab as shipped: each experiment's numbers and statuses, and a deterministic log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sagaway.cli.lab import lab as lab_command
from sagaway.lab import EXPERIMENTS, Result, run_lab

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def results() -> dict[tuple[int, str], Result]:
    import asyncio

    found = asyncio.run(run_lab())
    return {(r.experiment.number, r.variant.label): r for r in found}


def test_every_variant_reproduces_source_001(results: dict[tuple[int, str], Result]) -> None:
    assert len(results) == sum(len(e.variants) for e in EXPERIMENTS) == 8
    assert all(r.ok for r in results.values())


def test_1_card_declined_compensates_in_reverse(results: dict[tuple[int, str], Result]) -> None:
    r = results[1, "alice's card is declined"]
    assert r.available == 3
    assert r.orders == {"saga-A": "CANCELLED"}  # cancelled, not deleted
    assert r.workflows == {"saga-A": "FAILED"}
    assert r.compensations == {"saga-A": ["inventory.ReleaseStock", "order.CancelOrder"]}
    assert r.charges == 0 and r.shipments == 0
    assert r.log == [
        "t= 0  orchestrator start              saga-A  alice: 1 book",
        "t= 1  order        CreateOrder        saga-A",
        "t= 3  inventory    ReserveStock       saga-A  -> available=2",
        "t= 9  payment      ChargeCard         saga-A  1000 yen -> card_declined",
        "t=10  orchestrator compensate         saga-A  ChargeCard: card_declined",
        "t=11  inventory    ReleaseStock       saga-A  -> available=3",
        "t=13  order        CancelOrder        saga-A",
        "t=14  orchestrator cancelled          saga-A  compensations done",
    ]


def test_2_dirty_read_without_and_with_a_semantic_lock(
    results: dict[tuple[int, str], Result],
) -> None:
    plain = results[2, "no semantic lock"]
    assert plain.available == 1
    assert plain.orders == {"saga-A": "CANCELLED", "saga-B": "CANCELLED"}
    assert "t= 4  page         product page               out of stock" in plain.log
    assert "t= 7  inventory    ReserveStock       saga-B  -> available=0  out_of_stock" in (
        plain.log
    )
    # bob's ReleaseStock was registered before his reservation ran: it finds nothing to do
    assert "t= 9  inventory    ReleaseStock       saga-B  -> available=0  nothing to release" in (
        plain.log
    )

    locked = results[2, "semantic lock (PENDING)"]
    assert locked.available == 0
    assert locked.orders == {"saga-A": "CANCELLED", "saga-B": "CONFIRMED"}
    assert locked.workflows == {"saga-A": "FAILED", "saga-B": "COMPLETED"}
    assert locked.attempts["saga-B"]["inventory.ReserveStock"] == 2  # busy, then retried
    assert locked.compensations["saga-B"] == []
    assert "t= 7  inventory    ReserveStock       saga-B  -> available=0  busy" in locked.log
    assert "t=15  inventory    ReserveStock       saga-B  -> available=0" in locked.log
    assert any("on hold" in line for line in locked.log if " page " in line)


def test_3_write_back_loses_an_update_and_a_delta_does_not(
    results: dict[tuple[int, str], Result],
) -> None:
    wrong = results[3, "write the old value back"]
    right = results[3, "add the quantity back"]
    for r in (wrong, right):
        assert r.orders == {"saga-A": "CANCELLED", "saga-B": "CONFIRMED"}
        assert r.charges == 1 and r.shipments == 1
    assert wrong.available == 2  # bob's reservation erased: the database says 2, the shelf 1
    assert right.available == 1


def test_4_a_step_after_the_pivot_is_retried_not_compensated(
    results: dict[tuple[int, str], Result],
) -> None:
    r = results[4, "carrier times out once"]
    assert r.available == 2
    assert r.orders == {"saga-A": "CONFIRMED"}
    assert r.workflows == {"saga-A": "COMPLETED"}
    assert r.compensations == {"saga-A": []}
    assert r.attempts["saga-A"]["shipping.ArrangeShipping"] == 2
    assert r.attempts["saga-A"]["payment.ChargeCard"] == 1 and r.charges == 1
    assert r.shipments == 1
    assert r.log[4:7] == [
        "t=11  shipping     ArrangeShipping    saga-A  -> timeout",
        "t=12  orchestrator retry              saga-A  ArrangeShipping: timeout",
        "t=19  shipping     ArrangeShipping    saga-A  -> ok",
    ]


def test_5_a_redelivered_compensation_needs_a_state_check(
    results: dict[tuple[int, str], Result],
) -> None:
    naive = results[5, "add back, unchecked"]
    checked = results[5, "release a held one only"]
    for r in (naive, checked):
        assert r.deliveries.count("ReleaseStock") == 2  # the restarted relay sent it again
        assert r.orders == {"saga-A": "CANCELLED"}
        assert r.compensations == {"saga-A": ["inventory.ReleaseStock", "order.CancelOrder"]}
        assert any("relay        stopped" in line for line in r.log)
    assert naive.available == 4
    assert checked.available == 3
    assert "t=12  inventory    ReleaseStock       saga-A  -> available=3  nothing to release" in (
        checked.log
    )


def test_every_run_prints_the_same_log(results: dict[tuple[int, str], Result]) -> None:
    import asyncio

    again = asyncio.run(run_lab([2, 3]))
    for r in again:
        assert r.log == results[r.experiment.number, r.variant.label].log


def test_the_cli_prints_a_table_and_json() -> None:
    runner = CliRunner()
    out = runner.invoke(lab_command, ["-q"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].split() == ["#", "experiment", "variant", "available", "orders", "verdict"]
    assert len(lines) == 2 + 8
    assert "wrong: a 4th book that is not there" in out.output
    as_json = runner.invoke(lab_command, ["--json", "-e", "4"])
    assert as_json.exit_code == 0
    data = json.loads(as_json.output)
    assert [(d["experiment"], d["available"], d["orders"], d["ok"]) for d in data] == [
        (4, 2, {"saga-A": "CONFIRMED"}, True)
    ]
    full = runner.invoke(lab_command, ["-e", "1"])
    assert "Experiment 1: card declined" in full.output
    assert "-- result: available=3  saga-A=CANCELLED" in full.output


def test_the_example_runner_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "order_lab" / "run.py"), "-q"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "duplicated compensation" in done.stdout
    assert list(tmp_path.iterdir()) == []  # the databases went to a temporary directory
