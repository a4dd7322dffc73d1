"""kill -9 of a process in the middle of a fork's transaction, after the kept steps and the
stream items they wrote were copied and before the search attributes were: nothing of the fork
is left (no half-copied fork); forked again, it has what its kept publish steps published,
once, then what it published itself. SQLite and PostgreSQL: the fork's transaction runs in the
killed process (behind an Engine Server it runs in the server: test_server_crash.py)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.processes import Script, script

pytestmark = pytest.mark.long  # starts real processes: run by `pytest -m long`

APP = Path(__file__).with_name("fork_publish_app.py")


def _spawn(db_url: str, mode: str) -> Script:
    return script(
        APP,
        [db_url, mode],
        {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def _finish(proc: Script) -> str:
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    return out


@pytest.mark.slow
@pytest.mark.direct_db  # the transaction must run in the killed process, not in a server
def test_a_fork_killed_mid_copy_leaves_nothing_and_is_made_again_whole(db_url: str) -> None:
    assert _finish(_spawn(db_url, "source")) == "FAILED\n"

    victim = _spawn(db_url, "victim")
    try:
        assert victim.stdout is not None
        line = victim.stdout.readline()  # explicit synchronisation: inside the transaction
        assert line == "COPYING\n", victim.stderr.read() if victim.stderr else line
        victim.send_signal(signal.SIGKILL)
        victim.communicate(timeout=10)
        assert victim.returncode == -signal.SIGKILL
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.communicate(timeout=10)

    lines = _finish(_spawn(db_url, "rescue")).splitlines()
    assert lines[0] == "NO FORK"
    found = dict(line.split(" ", 1) for line in lines[1:])
    assert json.loads(found["RESULT"]) == "checked"
    assert json.loads(found["STREAM"]) == [[0, "a"], [1, "b"], [2, "checked"]]
    assert json.loads(found["EVENT"]) == "done"
    assert json.loads(found["ATTRIBUTES"]) == {"stage": "written"}
