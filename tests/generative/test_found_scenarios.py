"""Scenarios the generative test found, kept as they were reported and run on every backend.

Each file in ``tests/data/generative`` is a ``--gen-replay`` scenario that once broke a promise
(the file says which in this module's table); it runs with every building block on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.generative.program import Scenario
from tests.generative.settings import GenSettings
from tests.generative.test_generative import BACKENDS, _explain, _run_one

SCENARIOS = Path(__file__).resolve().parents[1] / "data" / "generative"

FOUND = {
    "fork_keeps_publications.json": (
        "a fork from step 2 keeps the publish step 1 (w0.w1) and replays it without publishing: "
        "fork_workflow copied the steps only, so the fork's stream lacked w0.w1 (a SQLite soak, "
        "seed 1008422517: stream ['w0.w5'], expected {'w0.w5', 'w0.w1'})"
    ),
    "publish_then_gather.json": (
        "a publish before a gather (then a forced fork from step 1): on PostgreSQL the tasks the "
        "store created while it wrote were numbered as workflow branches, and the replay found "
        "call 2/1 recorded as another branch's sleep (NonDeterminismError)"
    ),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(FOUND))
def test_a_found_scenario_keeps_every_promise(backend: str, name: str, tmp_path: Path) -> None:
    scenario = Scenario.from_json(json.loads((SCENARIOS / name).read_text()))
    # Started as when they were found (the later blocks drawn from the programs' hash off).
    settings = GenSettings(
        debounced_starts=False,
        shared_lines=False,
        prioritised_starts=False,
        activity_queue=False,
        activity_priority=False,
        registered_priorities=False,
    )
    report = _run_one(backend, tmp_path, scenario, settings)
    assert not report.problems, f"{FOUND[name]}\n" + _explain(scenario, report, None)
