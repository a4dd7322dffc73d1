"""Fixtures of the generative test: its configuration, fresh databases, and the run's counts."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import POSTGRES_URL, drop_schema, require_postgres, served
from tests.generative import premigrate
from tests.generative.runner import Report
from tests.generative.settings import GenSettings, from_environment


@dataclasses.dataclass
class GenConfig:
    settings: GenSettings
    examples: int | None
    seed: int | None
    soak: float
    replay: str | None


@dataclasses.dataclass
class Stats:
    """What the generative runs of this session executed (printed at the end)."""

    programs: Counter[str] = dataclasses.field(default_factory=Counter)
    runs: Counter[str] = dataclasses.field(default_factory=Counter)
    faults: Counter[str] = dataclasses.field(default_factory=Counter)
    processes: Counter[str] = dataclasses.field(default_factory=Counter)
    failing: Counter[str] = dataclasses.field(default_factory=Counter)
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    blocks: Counter[str] = dataclasses.field(default_factory=Counter)
    """Scenarios (or runs) with a building block counted apart (``Report.blocks``)."""

    def add(self, backend: str, report: Report, seconds: float) -> None:
        self.programs[backend] += 1
        self.runs[backend] += report.runs
        self.processes[backend] += report.processes
        self.seconds[backend] = self.seconds.get(backend, 0.0) + seconds
        for kind, n in report.faults.items():
            self.faults[f"{backend}:{kind}"] += n
        if report.problems:
            self.failing[backend] += 1
        for block, n in report.blocks.items():
            self.blocks[f"{backend}:{block}"] += n


STATS = Stats()


@pytest.fixture(scope="session")
def gen_config(pytestconfig: pytest.Config) -> GenConfig:
    return GenConfig(
        settings=from_environment(pytestconfig.getoption("--gen-enable")),
        examples=pytestconfig.getoption("--gen-examples"),
        seed=pytestconfig.getoption("--gen-seed"),
        soak=pytestconfig.getoption("--soak"),
        replay=pytestconfig.getoption("--gen-replay"),
    )


@contextlib.contextmanager
def fresh_database(backend: str, root: Path) -> Iterator[str]:
    """An empty database for one example: a new SQLite file, or a new PostgreSQL schema; for
    ``grpc+…``, an Engine Server process in front of one."""
    if backend.startswith("grpc+"):
        # The next example's server starts while this one runs.
        with served(backend.removeprefix("grpc+"), again=True) as url:
            yield url
        return
    if backend == "sqlite":
        path = root / f"gen-{uuid.uuid4().hex[:12]}.db"
        try:
            yield f"sqlite:///{path}"
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    require_postgres()
    ahead = premigrate.active()
    schema = f"g_{uuid.uuid4().hex[:12]}" if ahead is None else ahead.take()
    sep = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{sep}schema={schema}"
    finally:
        # Dropped behind the next examples, as every test's schema is (tests/schema_dropper.py):
        # nothing uses the name again, and the dropper also vacuums the catalogs it bloats.
        drop_schema(schema)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not STATS.programs:
        return
    write = terminalreporter.write_line
    terminalreporter.section("generative engine test")
    for backend, programs in sorted(STATS.programs.items()):
        faults = {k.split(":", 1)[1]: n for k, n in STATS.faults.items() if k.startswith(backend)}
        write(
            f"{backend}: {programs} programs ({STATS.failing[backend]} failing), "
            f"{STATS.runs[backend]} workflow runs, {STATS.processes[backend]} processes, "
            f"{sum(faults.values())} faults {dict(sorted(faults.items()))}, "
            f"{STATS.seconds.get(backend, 0.0):.1f}s"
        )
        blocks = {k.split(":", 1)[1]: n for k, n in STATS.blocks.items() if k.startswith(backend)}
        if blocks:
            write(f"  {backend} building blocks: {dict(sorted(blocks.items()))}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each mode runs only its own test: the soak and replay tests are not collected unless
    asked for (they would only show as skipped), and asking for one leaves out the CI run."""
    soak = bool(config.getoption("--soak"))
    replay = config.getoption("--gen-replay") is not None
    wanted = (
        "test_soak"
        if soak
        else "test_replay"
        if replay
        else "test_generated_programs_keep_every_promise"
    )
    keep, drop = [], []
    for item in items:
        name = getattr(item, "originalname", item.name)
        in_generative = item.nodeid.startswith("tests/generative/test_generative.py")
        (drop if in_generative and name != wanted else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
