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
from tests.generative.program import (
    Act,
    Child,
    FaultPlan,
    Gather,
    Program,
    Receive,
    Scenario,
    Sleep,
    TopLevel,
)
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
SETTINGS = GenSettings(
    purge=False, debounced_starts=False, shared_lines=False, prioritised_starts=False
)
"""Forks of sources no purge deletes first, started as the scenarios were written (a burst
would hold a source PENDING for its quiet period, which the scenarios here do not expect)."""


@pytest.mark.parametrize(("force", "outcome"), [(False, "fork_refused"), (True, "fork_forked")])
def test_a_fork_dropping_compensations_is_refused_unless_forced(
    force: bool, outcome: str, tmp_path: Path
) -> None:
    top = dataclasses.replace(SOURCE, fork_force=force)
    scenario = Scenario((top,), FaultPlan())
    with fresh_database("sqlite", tmp_path) as url:
        report = asyncio.run(run_scenario(scenario, SETTINGS, url))
    assert report.problems == []
    assert report.blocks[outcome] == 1


def test_old_replay_json_without_fork_fields_loads() -> None:
    data = Scenario((SOURCE,), FaultPlan()).to_json()
    for workflow in data["workflows"]:
        del workflow["fork_from"], workflow["fork_force"]
    (top,) = Scenario.from_json(data).workflows
    assert (top.fork_from, top.fork_force) == (None, False)


def test_a_cancelled_fork_compensates_the_steps_it_kept(tmp_path: Path) -> None:
    """A forced fork keeps step 1 (a1) of a source whose child was cancelled; the fork's step 2
    attaches to that child, under the key the program chose, and the fork ends CANCELLED after
    compensating the kept a1. The check counted only the fork's own commits as steps to undo:
    'wf0-fork (CANCELLED): compensated ['w0.a2'], expected []' (a SQLite soak, flaky: the fork
    ends FAILED or CANCELLED by timing)."""
    child = Child("w0.c2", Program("w0.c2", "none", (Sleep("w0.c2.t1", 3600.0),)), "get", "user")
    program = Program("w0", "with", (Act("w0.a1", sync=False, compensate="ok"), child))
    top = TopLevel("wf0", program, (), cancel_child=True, fork_from=1, fork_force=True)
    with fresh_database("sqlite", tmp_path) as url:
        report = asyncio.run(run_scenario(Scenario((top,), FaultPlan()), SETTINGS, url))
    assert report.problems == []
    assert report.blocks["fork_forked"] == 1


def test_a_fork_reads_the_end_of_a_child_whose_start_it_kept(tmp_path: Path) -> None:
    """The source was cancelled while it waited for its child, and the child with it; a fork
    from step 2 keeps the child's start and reads that child's end: it ends CANCELLED. The
    model counted only the fork's own children: 'wf0-fork: expected COMPLETED, got CANCELLED
    ... wf0/1 ended CANCELLED' (a SQLite soak, seed 1378290689)."""
    child = Child("w0.c1", Program("w0.c1", "none", (Sleep("w0.c1.t1", 3600.0),)), "get")
    top = TopLevel("wf0", Program("w0", "none", (child,)), (), cancel=True, fork_from=1)
    with fresh_database("sqlite", tmp_path) as url:
        report = asyncio.run(run_scenario(Scenario((top,), FaultPlan()), SETTINGS, url))
    assert report.problems == []
    assert report.blocks["fork_forked"] == 1


def test_a_fork_joins_a_child_under_a_key_its_program_chose(tmp_path: Path) -> None:
    """The fork runs with its source's arguments, so a child key the program builds from its
    key (``slash``: ``wf0/1-kid``) names the source's child, which the client had cancelled: the
    fork attaches to it and ends CANCELLED. The model counted only the fork's own children
    (a SQLite soak, seed 3999328674: "wf1-fork: expected COMPLETED, got CANCELLED")."""
    child = Child("w0.c1", Program("w0.c1", "none", (Sleep("w0.c1.t1", 3600.0),)), "get", "slash")
    top = TopLevel("wf0", Program("w0", "none", (child,)), (), cancel_child=True, fork_from=0)
    with fresh_database("sqlite", tmp_path) as url:
        report = asyncio.run(run_scenario(Scenario((top,), FaultPlan()), SETTINGS, url))
    assert report.problems == []
    assert report.blocks["fork_forked"] == 1


def test_a_fork_from_step_1_keeps_no_live_child(tmp_path: Path) -> None:
    """A fork from step 1 keeps nothing, not even a gather's branch steps, so no start of a
    live child either: the fork is made. The check took every branch's child start for one the
    fork may keep, whatever the step ('fork of wf0 from step 1 (force=True) was forked although
    it keeps the start of a live child', a SQLite soak, seed 2024929947: the source's branch
    started a child that suspends, and the source was cancelled)."""
    suspends = Program(
        "w0.c2",
        "none",
        (Act("w0.c2.a1", sync=True), Act("w0.c2.a2", sync=True, kind="fail_always")),
    )
    program = Program(
        "w0",
        "none",
        (
            Sleep("w0.t1", 0.5),
            Gather("w0.g2", ((Receive("w0.r3", 86400.0),), (Child("w0.c4", suspends, "start"),))),
        ),
    )
    top = TopLevel("wf0", program, signals=(), cancel=True, fork_from=0, fork_force=True)
    with fresh_database("sqlite", tmp_path) as url:
        report = asyncio.run(run_scenario(Scenario((top,), FaultPlan()), SETTINGS, url))
    assert report.problems == []
    assert report.blocks["fork_forked"] == 1
