"""Recorded times are the clock's, on every backend: a signal receive with a long timeout that
is answered early ends when the signal came (not at its deadline), and so do the steps after
it; the signal's delivery is dated then too. Every reader shows those times (``describe()``,
``sagaway show`` and its ``--json`` and ``--follow``, the console's timeline). A durable
timer's output is shown as the wake-up time it is, not as epoch seconds."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from click.testing import CliRunner, Result

import sagaway as sw
from sagaway.cli import _format, show
from sagaway.cli.main import cli
from sagaway.console import ConsoleConfig, create_app, rendering, timeline
from sagaway.testing import FakeClock, time_skipping_manager
from sagaway.testing.internals import engine_of
from tests.integration.test_console import BASE, text_of

EARLY = 0.3
"""Seconds after the receive began that the signal is sent (its timeout is an hour)."""
WORK = 0.05
"""Seconds the activity after the receive takes (fake time)."""


async def console_page(db_url: str, key: str) -> str:
    """The text of ``key``'s page in the web console (``sagaway ui``)."""
    from starlette.testclient import TestClient

    def get() -> str:
        with TestClient(create_app(ConsoleConfig(url=db_url)), base_url=BASE) as client:
            page = client.get(f"/workflows/{key}")
            assert page.status_code == 200, page.text
            return " ".join(text_of(page.text).split())

    return await asyncio.to_thread(get)


async def sagaway(*args: str) -> Result:
    """Run the ``sagaway`` command (it runs its own event loop: in a thread)."""
    return await asyncio.to_thread(CliRunner().invoke, cli, list(args))


async def reaches(
    handle: sw.WorkflowHandle[Any], status: sw.WorkflowStatus
) -> sw.WorkflowDescription:
    async def poll() -> sw.WorkflowDescription:
        while True:
            d = await handle.describe()
            if d.status is status:
                return d
            await asyncio.sleep(0.01)

    return await asyncio.wait_for(poll(), 20)


class App:
    """A manager on a FakeClock: ``approval`` receives a signal with an hour's timeout, then
    ships (an activity the test lets finish); ``nap`` sleeps 90 s."""

    def __init__(self, db_url: str) -> None:
        self.clock = FakeClock()
        self.manager = time_skipping_manager(db_url, self.clock)
        self.shipping = asyncio.Event()
        self.ship_done = asyncio.Event()
        m = self.manager

        @m.register_activity(name="ship")
        async def ship(what: str) -> str:
            self.shipping.set()
            await self.ship_done.wait()
            return f"shipped {what}"

        @m.register_workflow(name="approval")
        async def approval() -> str:
            answer = await m.signal("approve").receive(str, timeout=3600)
            return await ship(answer)

        @m.register_workflow(name="nap")
        async def nap() -> str:
            await m.sleep(90)
            return "rested"

    def now(self) -> float:
        """Now on the engine's clock: the FakeClock's, read through the database's offset
        (PostgreSQL records server times)."""
        return engine_of(self.manager).clock.now()


@pytest.fixture
async def app(db_url: str) -> AsyncIterator[App]:
    app = App(db_url)
    async with app.manager:
        yield app


async def answered_early(app: App, key: str) -> tuple[sw.WorkflowDescription, float]:
    """Run ``approval`` under ``key``: the signal comes EARLY seconds into its hour's wait,
    the activity takes WORK seconds. Its description while it waited, and when it began."""
    handle = await app.manager.workflow("approval").execute(idempotency_key=key)
    waiting = await reaches(handle, sw.WorkflowStatus.WAITING)
    began = waiting.steps[0].started_at
    await app.clock.advance(EARLY)
    assert await app.manager.signal("approve").send(key, "yes")
    await asyncio.wait_for(app.shipping.wait(), 20)
    await app.clock.advance(WORK)
    app.ship_done.set()
    assert await asyncio.wait_for(handle.result(), 20) == "shipped yes"
    return waiting, began


def never_ahead(d: sw.WorkflowDescription, now: float) -> None:
    """Every time ``d`` records as having happened is at or before ``now``."""
    times = [d.created_at, d.updated_at, *(t for t in [d.ended_at] if t is not None)]
    for s in d.steps:
        times.append(s.started_at)
        if s.ended_at is not None and s.kind is not sw.StepKind.SLEEP:
            assert s.status is not sw.StepStatus.WAITING
            times.append(s.ended_at)
    for sig in d.signals:
        times += [sig.sent_at, *(t for t in [sig.handled_at] if t is not None)]
    assert max(times) <= now, [(t - now) for t in times if t > now]


async def test_a_timed_wait_answered_early_records_when_it_was_answered(app: App) -> None:
    _, began = await answered_early(app, "a-1")
    d = await app.manager.get_workflow("a-1").describe()
    never_ahead(d, app.now())
    receive, ship = d.steps
    assert receive.kind is sw.StepKind.SIGNAL and receive.status is sw.StepStatus.COMPLETED
    assert receive.duration == pytest.approx(EARLY, abs=1e-3)
    assert ship.ended_at == pytest.approx(began + EARLY + WORK, abs=1e-3)
    (signal,) = d.signals
    assert signal.handled_at == pytest.approx(began + EARLY, abs=1e-3)
    assert d.ended_at == pytest.approx(began + EARLY + WORK, abs=1e-3)


async def test_a_cancel_delivered_at_a_timed_wait_is_dated_when_it_came(app: App) -> None:
    handle = await app.manager.workflow("approval").execute(idempotency_key="c-1")
    began = (await reaches(handle, sw.WorkflowStatus.WAITING)).steps[0].started_at
    await app.clock.advance(EARLY)
    assert await handle.cancel("not needed")
    d = await reaches(handle, sw.WorkflowStatus.CANCELLED)
    never_ahead(d, app.now())
    (receive,) = d.steps
    assert receive.status is sw.StepStatus.FAILED and receive.error is not None
    assert receive.ended_at == pytest.approx(began + EARLY, abs=1e-3)


async def test_show_and_its_json_give_the_real_durations(app: App, db_url: str) -> None:
    _, began = await answered_early(app, "a-2")
    result = await sagaway("show", "a-2", "--db", db_url, "--json", "--utc")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    receive, ship = data["steps"]
    assert receive["duration"] == pytest.approx(EARLY, abs=1e-3)
    assert ship["duration"] == pytest.approx(WORK, abs=1e-3)
    assert data["duration"] == pytest.approx(EARLY + WORK, abs=0.05)
    (signal,) = data["signals"]
    assert signal["handled_at"] == pytest.approx(began + EARLY, abs=1e-3)

    text = (await sagaway("show", "a-2", "--db", db_url, "--utc")).output
    assert re.search(r"status +COMPLETED +\(after 350 ms\)", text), text
    assert re.search(r"\n1 +signal +approve +COMPLETED +1 +\+0\.0 ms +300 ms\n", text), text
    assert re.search(r"\n2 +activity +ship +COMPLETED +1 +\+300 ms +50 ms\n", text), text
    handled = _format.Clock(utc=True).text(began + EARLY)
    assert f"to step 1 at {handled}" in text, text


async def test_follow_prints_the_changes_in_the_order_they_happened(app: App) -> None:
    """What ``show --follow`` prints after one read (``show.follow_events``): the receive, the
    signal's delivery, the activity, then the end."""
    waiting, _ = await answered_early(app, "a-3")
    ended = await app.manager.get_workflow("a-3").describe()
    events = show.follow_events(waiting, ended, _format.Clock(utc=True))
    assert [(e["event"], e.get("name", e.get("status"))) for e in events] == [
        ("step", "approve"),
        ("signal", "approve"),
        ("step", "ship"),
        ("status", "COMPLETED"),
    ]
    times = [show.event_time(e) for e in events]
    assert times == sorted(times) and max(times) <= app.now()


async def test_the_console_timeline_spans_the_run_not_the_timeout(app: App, db_url: str) -> None:
    await answered_early(app, "a-4")
    d = await app.manager.get_workflow("a-4").describe()
    drawn = timeline.build(d, now=app.now())
    assert drawn.span == pytest.approx(EARLY + WORK, abs=0.05)
    receive, ship = drawn.bars
    assert not receive.open and not ship.open
    assert receive.width == pytest.approx(EARLY / drawn.span * 100, abs=1)
    page = await console_page(db_url, "a-4")
    ticks = re.findall(r"\+(\d[^+]*?)(?=\s+\+|\s+#)", page)
    assert ticks and ticks[-1].strip() == "350 ms", page


async def test_a_sleep_shows_its_wake_up_time_as_a_time(app: App, db_url: str) -> None:
    handle = await app.manager.workflow("nap").execute(idempotency_key="nap-1")
    d = await reaches(handle, sw.WorkflowStatus.WAITING)
    (sleep,) = d.steps
    wakes = sleep.started_at + 90
    assert sleep.result == pytest.approx(wakes)  # the stored output, as replays read it
    shown = _format.Clock(utc=True).text(wakes)
    text = (await sagaway("show", "nap-1", "--db", db_url, "--utc")).output
    assert re.search(rf"\n +1 sleep +wakes {re.escape(shown)}\n", text), text
    assert str(sleep.result) not in text
    data = json.loads((await sagaway("show", "nap-1", "--db", db_url, "--json", "--utc")).stdout)
    (step,) = data["steps"]
    assert step["wakes_at"] == pytest.approx(wakes)
    parsed = datetime.datetime.fromisoformat(step["wakes_at_iso"])
    assert parsed.timestamp() == pytest.approx(wakes, abs=1e-6)
    # ``show --follow`` that read it before it began: the sleep step, then the wait.
    began = dataclasses.replace(d, status=sw.WorkflowStatus.RUNNING, waiting_for=None, steps=[])
    events = show.follow_events(began, d, _format.Clock(utc=True))
    assert [e["event"] for e in events] == ["step", "status"]
    assert [show.event_time(e) for e in events] == [sleep.started_at, d.updated_at]
    page = await console_page(db_url, "nap-1")
    assert f"wakes {rendering.when(wakes)}" in page and str(sleep.result) not in page, page
    await app.clock.advance(90)
    assert await asyncio.wait_for(handle.result(), 20) == "rested"
