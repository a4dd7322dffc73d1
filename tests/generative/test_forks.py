"""The ``fork`` building block on a fixed scenario: a saga that failed and compensated.

Generated scenarios rarely fork such a source between its steps and its compensations, so the
refusal is also checked here: from step 2 (keeping step 1's charge, dropping the refund at
step 3) the fork is refused and creates nothing; forced, it replays step 1, runs step 2 again
and compensates step 1 in the fork's run (``forks.py`` checks every one of those).
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from tests.generative.conftest import fresh_database
from tests.generative.program import Act, FaultPlan, Program, Scenario, TopLevel
from tests.generative.runner import run_scenario
from tests.generative.settings import GenSettings

PROGRAM = Program(
    "w0",
    "with",
    (
        Act("w0.a1", sync=False, compensate="ok"),
        Act("w0.a2", sync=False, kind="completable"),
    ),
)
# Steps: 1 a1, 2 a2 (failed), 3 the compensation of a1: fork_from=1 is step 1 + 1 % 4 = 2.
SOURCE = TopLevel("wf0", PROGRAM, signals=(), fork_from=1)


@pytest.mark.parametrize(("force", "outcome"), [(False, "fork_refused"), (True, "fork_forked")])
def test_a_fork_dropping_compensations_is_refused_unless_forced(
    force: bool, outcome: str, tmp_path: Path
) -> None:
    top = dataclasses.replace(SOURCE, fork_force=force)
    scenario = Scenario((top,), FaultPlan())
    with fresh_database("sqlite", tmp_path) as url:
        report = asyncio.run(run_scenario(scenario, GenSettings(fork=True), url))
    assert report.problems == []
    assert report.blocks[outcome] == 1


def test_old_replay_json_without_fork_fields_loads() -> None:
    data = Scenario((SOURCE,), FaultPlan()).to_json()
    for workflow in data["workflows"]:
        del workflow["fork_from"], workflow["fork_force"]
    (top,) = Scenario.from_json(data).workflows
    assert (top.fork_from, top.fork_force) == (None, False)
