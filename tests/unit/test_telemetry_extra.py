"""Without prometheus-client, metrics fail with one line naming the extra; the rest loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCK = "import sys; sys.modules['prometheus_client'] = None; "


def _python(code: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK + code, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_metrics_without_the_extra_name_it() -> None:
    done = _python(
        "import sagaway.telemetry as t; t.enable_tracing(); t.disable_tracing()\n"
        "try:\n    t.enable_metrics()\nexcept ImportError as e:\n    print(e)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "metrics need prometheus-client: pip install 'sagaway[metrics]'"


def test_worker_metrics_port_without_the_extra_exits_2_with_one_line(tmp_path: Path) -> None:
    done = _python(
        "from sagaway.cli.main import main; main()",
        "worker",
        "tests.acceptance.worker_app:manager",
        "--metrics-port",
        "0",
        WORKER_DB_URL=f"sqlite:///{tmp_path}/w.db",
        WORKER_DIR=str(tmp_path),
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'sagaway[metrics]'" in done.stderr
    assert "Traceback" not in done.stderr
