"""A schema upgrade with work in flight: the previous release's database opened by this code.

The previous release runs from its wheel (tests/fixtures/releases; see the README there), put
first on PYTHONPATH of a subprocess; this code runs from the working tree. The app
(upgrade_app.py) uses only the 0.1.0 API, so both run it. The story:

1. Old code creates the database (schema version 10 on PostgreSQL, 8 on SQLite) and leaves
   workflows COMPLETED, FAILED (compensated), SUSPENDED, WAITING on a signal, on a timer and on
   a child that waits on a signal, and PENDING; an old worker holds one RUNNING in an activity.
2. With that worker still running, two new-code processes open the database at once: every
   missing migration is applied exactly once.
3. The old worker finishes its activity on the migrated schema and starts another workflow.
4. A new-code worker sends the signals, retries the suspended workflow, and everything ends as
   expected, each effect applied once (the ledger).
5. Old code opening the migrated database is refused with a clear error.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import psycopg
import pytest
from psycopg import sql

from sagaway.store.migrations import latest_version, migrations
from tests.store_helpers import is_sqlite, raw_sql

pytestmark = pytest.mark.long  # starts real processes: run by `pytest -m long`

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("upgrade_app.py")
OLD_WHEEL = ROOT / "tests" / "fixtures" / "releases" / "sagaway-0.1.0-py3-none-any.whl"
OLD_SCHEMA = {"postgres": 10, "sqlite": 8}
SQLITE_MARGIN = 0.5

EXPECTED_STATES = {
    "done": "COMPLETED",
    "failed": "FAILED",
    "suspended": "SUSPENDED",
    "signal": "WAITING",
    "timer": "WAITING",
    "parent": "WAITING",
    "parent/1": "WAITING",
    "pending": "PENDING",
}
EXPECTED_RESULTS = {
    "done": ["reserve:done", "charge:done"],
    "failed": {"failed": "DECLINED"},
    "suspended": "flaky:suspended",
    "signal": "yes+note:signal",
    "timer": "note:timer",
    "parent": "parent(ok+note:parent/1)",
    "parent/1": "ok+note:parent/1",
    "pending": "note:pending",
    "held": "blocking:held",
    "old-after": ["reserve:old-after", "charge:old-after"],
}
EXPECTED_EFFECTS = sorted(
    [
        ("done", "reserve"),
        ("done", "charge"),
        ("failed", "reserve"),
        ("failed", "release"),
        ("suspended", "flaky"),
        ("signal", "note"),
        ("parent/1", "note"),
        ("timer", "note"),
        ("pending", "note"),
        ("held", "blocking"),
        ("old-after", "reserve"),
        ("old-after", "charge"),
    ]
)
FINAL = {
    "done": "COMPLETED",
    "failed": "FAILED",
    **{key: "COMPLETED" for key in EXPECTED_RESULTS if key not in ("done", "failed")},
}


def _spawn(db_url: str, work: Path, mode: str, *, old: bool) -> subprocess.Popen[str]:
    # Old code: the release's wheel first (zipimport); its dependencies come from this venv's
    # site-packages, which the interpreter adds itself. New code: this test's own path.
    path = [str(OLD_WHEEL)] if old else [str(ROOT), *sys.path]
    return subprocess.Popen(
        [sys.executable, str(APP), db_url, str(work), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
    )


def _line(proc: subprocess.Popen[str], prefix: str) -> str:
    """The next line of ``proc`` that starts with ``prefix`` (its rest), after the CODE line."""
    stdout: IO[str] | None = proc.stdout
    assert stdout is not None
    while True:
        line = stdout.readline()
        if not line:
            _, err = proc.communicate(timeout=10)
            raise AssertionError(f"no {prefix} line (exit {proc.returncode}): {err}")
        if line.startswith("CODE "):
            continue
        assert line.startswith(prefix), f"expected {prefix}, got {line!r}"
        return line[len(prefix) :].strip()


def _run(db_url: str, work: Path, mode: str, *, old: bool) -> subprocess.CompletedProcess[str]:
    proc = _spawn(db_url, work, mode, old=old)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _code_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("CODE "))


def _versions(db_url: str) -> list[tuple[int, int]]:
    return [
        (int(v), int(n))
        for v, n in raw_sql(
            db_url,
            "SELECT version, COUNT(*) FROM schema_migrations GROUP BY version ORDER BY version",
        )
    ]


def _pg_connect(db_url: str, *, autocommit: bool) -> psycopg.Connection[Any]:
    parts = urllib.parse.urlsplit(db_url)
    params = dict(urllib.parse.parse_qsl(parts.query))
    schema = params.pop("schema")
    conninfo = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(params)))
    conn = psycopg.connect(conninfo, autocommit=autocommit)
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    return conn


def _with_app_name(db_url: str, tag: str) -> str:
    """PostgreSQL: the URL with a libpq application_name, to find these sessions' locks."""
    return db_url if is_sqlite(db_url) else f"{db_url}&application_name={tag}"


@contextlib.contextmanager
def _migrations_held(db_url: str) -> Iterator[None]:
    """Hold off every migration meanwhile: SQLite's write lock; PostgreSQL: a lock on
    schema_migrations that blocks recording a migration (so a migrator that has run a script
    waits inside its transaction, and one that skipped the advisory lock would be seen)."""
    if is_sqlite(db_url):
        lite = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            lite.execute("BEGIN IMMEDIATE")
            yield
            lite.execute("ROLLBACK")
        finally:
            lite.close()
        return
    with _pg_connect(db_url, autocommit=False) as conn:
        conn.execute("LOCK TABLE schema_migrations IN SHARE MODE")
        yield
        conn.rollback()


def _wait_until_both_blocked(db_url: str, tag: str) -> None:
    """PostgreSQL: until both migrators wait on a lock (one behind the other's advisory lock,
    the other on schema_migrations). SQLite shows no waiters: both have said OPENING, and the
    lock is held a little longer so that both reach it (a margin, not what the test checks)."""
    if is_sqlite(db_url):
        time.sleep(SQLITE_MARGIN)
        return
    with _pg_connect(db_url, autocommit=True) as conn:
        deadline = time.monotonic() + 30
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                "AND wait_event_type = 'Lock'",
                (tag,),
            ).fetchone()
            if row is not None and row[0] == 2:
                return
            assert time.monotonic() < deadline, "the migrators never both waited on a lock"
            time.sleep(0.01)


def _ledger(work: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(work / "ledger.db") as conn:
        return conn.execute("SELECT workflow, activity, executions FROM ledger").fetchall()


@pytest.mark.slow
@pytest.mark.direct_db  # reads schema_migrations and workflows itself
def test_upgrade_with_work_in_flight(db_url: str, tmp_path: Path) -> None:
    dialect = "sqlite" if is_sqlite(db_url) else "postgres"
    old_version, new_version = OLD_SCHEMA[dialect], latest_version(dialect)
    assert new_version > old_version
    procs: list[subprocess.Popen[str]] = []
    try:
        # 1. The previous release creates the database and the workflows.
        setup = _run(db_url, tmp_path, "setup", old=True)
        assert setup.returncode == 0, setup.stderr
        assert f"{OLD_WHEEL}/sagaway/__init__.py" in _code_line(setup.stdout)
        states = json.loads(setup.stdout.split("STATES ", 1)[1])
        assert states == EXPECTED_STATES
        assert _versions(db_url) == [(v, 1) for v in range(1, old_version + 1)]

        old_worker = _spawn(db_url, tmp_path, "old-worker", old=True)
        procs.append(old_worker)
        _line(old_worker, "ENTERED")  # RUNNING, inside its activity, held by the old code

        # 2. New code opens it, twice at the same moment, while the old worker runs.
        tag = f"upgrade-{uuid.uuid4().hex[:12]}"
        migrators = [
            _spawn(_with_app_name(db_url, tag), tmp_path, "migrate", old=False) for _ in range(2)
        ]
        procs.extend(migrators)
        for proc in migrators:
            _line(proc, "READY")
        with _migrations_held(db_url):
            for proc in migrators:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            for proc in migrators:
                _line(proc, "OPENING")
            _wait_until_both_blocked(db_url, tag)
        for proc in migrators:
            _line(proc, "OPENED")
            _, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err
        assert _versions(db_url) == [(m.version, 1) for m in migrations(dialect)]
        statuses = dict(raw_sql(db_url, "SELECT key, status FROM workflows"))
        # Nothing ran meanwhile: no process serves these workflows' queues yet.
        assert statuses == {**EXPECTED_STATES, "held": "RUNNING"}

        # 3. The old worker goes on against the new schema.
        (tmp_path / "release-held").touch()
        assert json.loads(_line(old_worker, "RESULT held")) == EXPECTED_RESULTS["held"]
        assert _line(old_worker, "STARTED old-after") == "old-after"

        # 4. New code ends everything (the old worker still serving its queue meanwhile).
        (tmp_path / "fix-flaky").touch()
        finish = _run(db_url, tmp_path, "finish", old=False)
        assert finish.returncode == 0, finish.stderr
        assert json.loads(finish.stdout.split("RESULTS ", 1)[1]) == EXPECTED_RESULTS
        _, err = old_worker.communicate(timeout=30)  # closes its stdin: it stops
        assert old_worker.returncode == 0, err

        assert dict(raw_sql(db_url, "SELECT key, status FROM workflows")) == FINAL
        effects = _ledger(tmp_path)
        assert sorted((wf, activity) for wf, activity, _ in effects) == EXPECTED_EFFECTS
        assert {n for _, _, n in effects} == {1}

        # 5. The previous release refuses the migrated database.
        refused = _run(db_url, tmp_path, "open", old=True)
        assert refused.returncode != 0
        assert "OPENED" not in refused.stdout
        assert (
            f"has schema version {new_version}, newer than this Sagaway's {old_version}; "
            "upgrade Sagaway"
        ) in refused.stderr
        assert _versions(db_url) == [(m.version, 1) for m in migrations(dialect)]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
