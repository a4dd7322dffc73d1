"""What the browser tests of the web console share: ``sagaway ui`` and ``sagaway worker`` as
child processes, and headless Chromium driven by Selenium.

Chromium and its driver come from Debian's packages (``chromium``, ``chromium-driver``); the
driver's path is given to Selenium, so Selenium Manager never downloads a browser. Outside CI a
missing browser skips the tests with the reason; under ``CI=true`` it fails them.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("SAGAWAY_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("SAGAWAY_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
STARTUP_TIMEOUT = 30.0


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not Path(path).exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package")
    if not missing:
        return None
    return (
        f"no {', '.join(missing)}: apt-get install chromium chromium-driver "
        "(and pip install selenium)"
    )


def require_browser() -> None:
    """Skip (or, under CI=true, fail) when Chromium, its driver or Selenium is missing."""
    reason = browser_missing()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason + " (CI=true: the browser tests must run)")
    pytest.skip(reason)


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (1280x900) under Selenium."""
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--no-first-run", "--disable-extensions"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def env() -> dict[str, str]:
    """The environment of the child processes: this test run's imports, no ambient URLs or
    tokens."""
    ambient = ("SAGAWAY_DATABASE_URL", "SAGAWAY_TOKEN", "SAGAWAY_UI_TOKEN")
    environment = {k: v for k, v in os.environ.items() if k not in ambient}
    environment["PYTHONPATH"] = os.pathsep.join(sys.path)
    return environment


def _read_line(stream: IO[str] | None, timeout: float) -> str:
    if stream is None:
        return ""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return stream.readline()


class Child:
    """A ``python -m sagaway ...`` child process, stopped with SIGTERM (SIGKILL if it hangs)."""

    def __init__(self, args: list[str], log: Path, extra_env: dict[str, str] | None = None):
        self.log = log
        with log.open("a", encoding="utf-8") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sagaway", *args],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                cwd=ROOT,
                env={**env(), **(extra_env or {})},
            )

    def first_line(self) -> str:
        return _read_line(self.proc.stdout, STARTUP_TIMEOUT)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@contextmanager
def ui_process(url: str, log: Path, *options: str) -> Iterator[str]:
    """``sagaway ui --db url`` on a free port; yields its base URL (``http://HOST:PORT``)."""
    args = ["ui", "--db", url, "--listen", "127.0.0.1:0", "--refresh", "0.3", *options]
    child = Child(args, log)
    try:
        line = child.first_line()
        assert line.startswith("listening on http://"), (line, log.read_text(encoding="utf-8"))
        yield line.removeprefix("listening on ").strip()
    finally:
        child.stop()


@contextmanager
def worker_process(url: str, log: Path, flag: Path) -> Iterator[Child]:
    """``sagaway worker`` running the console test application on ``url``."""
    child = Child(
        ["worker", "tests.integration.console_app:manager", "--db", url, "--drain", "1"],
        log,
        {"CONSOLE_APP_FLAG": str(flag)},
    )
    try:
        yield child
    finally:
        child.stop()
