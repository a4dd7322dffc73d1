"""What the Engine does on a change another process (or this one) made, as the store announces
it: wake the waiters, the Recovery Worker, the scheduler or the local Worker that it concerns."""

from __future__ import annotations

import asyncio
from typing import Protocol

from sagaway import events
from sagaway._engine.local_runner import LocalRunner
from sagaway.channel import Channel
from sagaway.store import notices


class Engine(Protocol):
    """What hearing a notice uses of the Engine (``Engine.on_notification`` calls it)."""

    channel: Channel
    runner: LocalRunner | None
    notifications: bool
    end_notices: bool | None
    schedule_wake: asyncio.Event

    def wake_recovery(self) -> None: ...


def on_notification(engine: Engine, notice: notices.Notice) -> None:
    """A change made by another process (or this one), announced by the store."""
    match notice:
        case notices.Ended(run_id):
            engine.channel.publish(events.WorkflowChanged(run_id))
            if engine.runner is not None:
                engine.runner.ended_elsewhere(run_id)  # cancelled elsewhere while running here
        case notices.Published(run_id):
            engine.channel.publish(events.WorkflowChanged(run_id))  # its readers look
        case notices.Ready():
            engine.wake_recovery()
        case notices.SchedulesChanged():
            engine.schedule_wake.set()
        case notices.CancelRequested(run_id):
            if engine.runner is not None:
                engine.runner.cancel_requested(run_id, None)
        case notices.Listening("ends") | notices.Deaf("ends"):
            engine.end_notices = isinstance(notice, notices.Listening)
            engine.channel.wake_all()  # an end may have gone unheard: look again
        case notices.Listening() | notices.Deaf():
            # Notices may have been missed (or will be): everyone waiting looks again now.
            engine.notifications = isinstance(notice, notices.Listening)
            engine.channel.wake_all()
            engine.wake_recovery()
            engine.schedule_wake.set()
        case notices.Probe():
            pass  # a listener's own; never passed on
