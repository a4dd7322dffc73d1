"""The generative (model-based) test of the engine.

Hypothesis builds scenarios (workflow programs, the client's actions, a fault plan), each runs on
a fresh database against the reference model, and every invariant is checked after it. A
failure is shrunk to a small scenario, and printed with its JSON: ``--gen-replay='<json>'``
runs exactly that scenario again (``test_replay``). The CI-size run is seeded (``--gen-seed``
to change it); ``--soak=SECONDS`` runs batches of fresh seeds for that long.

    pytest tests/generative -q -m long                # CI size (a `long` test), four backends
    pytest tests/generative -q --soak=3600 -k soak    # an hour per backend
    pytest tests/generative -q -m long --gen-enable=terminate_restart   # a switch off by default
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from pathlib import Path

import hypothesis
import pytest
from hypothesis import HealthCheck, given

from tests.conftest import POSTGRES_URL, drop_schema
from tests.generative import premigrate
from tests.generative.conftest import STATS, GenConfig, fresh_database
from tests.generative.program import Scenario, scenarios
from tests.generative.runner import Report, run_scenario
from tests.generative.settings import GenSettings

BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("grpc+sqlite", marks=pytest.mark.grpc),
    pytest.param("grpc+postgres", marks=[pytest.mark.grpc, pytest.mark.postgres]),
]
CI_EXAMPLES = {"sqlite": 150, "postgres": 100, "grpc+sqlite": 20, "grpc+postgres": 20}
CI_SEED = 20260512
SOAK_BATCH = 100
"""Programs per seed in soak mode (hypothesis starts each seed with small programs)."""


def _run_one(backend: str, root: Path, scenario: Scenario, settings: GenSettings) -> Report:
    started = time.monotonic()
    with fresh_database(backend, root) as url:
        report = asyncio.run(run_scenario(scenario, settings, url))
    STATS.add(backend, report, time.monotonic() - started)
    return report


def _premigrating(backend: str) -> contextlib.AbstractContextManager[None]:
    """PostgreSQL examples' schemas migrated one ahead (tests/generative/premigrate.py)."""
    if backend != "postgres":
        return contextlib.nullcontext()
    return premigrate.premigrating(POSTGRES_URL, drop_schema)


def _explain(scenario: Scenario, report: Report, seed: int | None) -> str:
    lines = [f"{len(report.problems)} broken promise(s):"]
    lines += [f"  - {p}" for p in report.problems]
    lines.append(f"faults injected: {', '.join(report.fault_log) or 'none'}")
    if not report.settled:
        # Not a problem of its own: the runs that did not end as expected are reported.
        lines.append(f"the final settle stopped unsettled after {report.jumps} clock jumps")
    lines.append(f"seed: {seed}   replay this scenario with:")
    lines.append(f"  --gen-replay='{_compact(scenario)}'")
    return "\n".join(lines)


def _compact(scenario: Scenario) -> str:
    return json.dumps(scenario.to_json(), separators=(",", ":"))


def _check_batch(backend: str, root: Path, settings: GenSettings, examples: int, seed: int) -> None:
    @hypothesis.settings(
        max_examples=examples,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @hypothesis.seed(seed)
    @given(scenario=scenarios(settings))
    def check(scenario: Scenario) -> None:
        try:
            report = _run_one(backend, root, scenario, settings)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit from an activity must not end the session
            raise AssertionError(
                f"the scenario could not run: {exc!r}\nseed: {seed}   replay it with:\n"
                f"  --gen-replay='{_compact(scenario)}'"
            ) from exc
        if report.problems:
            raise AssertionError(_explain(scenario, report, seed))

    check()


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(900)
@pytest.mark.parametrize("backend", BACKENDS)
def test_generated_programs_keep_every_promise(
    backend: str, gen_config: GenConfig, tmp_path: Path
) -> None:
    if gen_config.soak or gen_config.replay:
        pytest.skip("--soak / --gen-replay run their own tests")
    examples = gen_config.examples or CI_EXAMPLES[backend]
    seed = CI_SEED if gen_config.seed is None else gen_config.seed
    before = STATS.blocks[f"{backend}:prioritised_starts"]
    with _premigrating(backend):
        _check_batch(backend, tmp_path, gen_config.settings, examples, seed)
    if gen_config.settings.prioritised_starts:
        # The block is drawn from a hash: a change of the programs' JSON or of the draw must
        # not leave it unexercised again (no start had a priority until 2026-12-05).
        assert STATS.blocks[f"{backend}:prioritised_starts"] > before, "no prioritised start"


@pytest.mark.slow
@pytest.mark.timeout(0)
@pytest.mark.parametrize("backend", BACKENDS)
def test_soak(backend: str, gen_config: GenConfig, tmp_path: Path) -> None:
    """Batches of fresh seeds until ``--soak`` seconds have passed (per backend)."""
    if not gen_config.soak:
        pytest.skip("soak mode is off (--soak=SECONDS)")
    deadline = time.monotonic() + gen_config.soak
    rng = random.Random()
    with _premigrating(backend):
        while time.monotonic() < deadline:
            seed = rng.randrange(2**32)
            print(f"soak {backend}: seed {seed}")
            _check_batch(backend, tmp_path, gen_config.settings, SOAK_BATCH, seed)


@pytest.mark.parametrize("backend", BACKENDS)
def test_replay(backend: str, gen_config: GenConfig, tmp_path: Path) -> None:
    """Run the one scenario given with ``--gen-replay`` (JSON, or a file holding it)."""
    if not gen_config.replay:
        pytest.skip("nothing to replay (--gen-replay=JSON)")
    text = gen_config.replay
    if not text.lstrip().startswith("{"):
        text = Path(text).read_text()
    scenario = Scenario.from_json(json.loads(text))
    report = _run_one(backend, tmp_path, scenario, gen_config.settings)
    assert not report.problems, _explain(scenario, report, None)
