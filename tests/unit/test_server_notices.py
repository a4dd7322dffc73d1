"""The server's fan-out of wake-ups to Watch streams."""

from __future__ import annotations

import asyncio

from sagaway.server.notices import MAX_BACKLOG, Hub, is_close


def _drain(queue: asyncio.Queue[str]) -> list[str]:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


def test_ready_is_queued_once_until_taken() -> None:
    hub = Hub(listening=True)
    queue = hub.subscribe()
    hub.publish("ready:")
    hub.publish("ready:")
    hub.publish("ended:r1")
    assert _drain(queue) == ["ready:", "ended:r1"]
    hub.publish("ready:")  # not taken yet: still pending
    hub.taken(queue, "ready:")
    hub.publish("ready:")
    assert _drain(queue) == ["ready:"]


def test_a_stream_that_does_not_read_holds_a_bounded_backlog() -> None:
    hub = Hub(listening=True)
    stuck, reading = hub.subscribe(), hub.subscribe()
    for i in range(MAX_BACKLOG + 5):
        hub.publish(f"ended:r{i}")
        if i % 100 == 0:
            _drain(reading)
    left = _drain(stuck)
    assert len(left) == 6
    assert left[0] == "listening:"  # what was dropped is found by looking again
    assert left[1:] == [f"ended:r{i}" for i in range(MAX_BACKLOG, MAX_BACKLOG + 5)]


def test_listening_state_and_close() -> None:
    hub = Hub(listening=False)
    queue = hub.subscribe()
    hub.publish("listening:")
    assert hub.listening
    hub.publish("deaf:")
    assert not hub.listening
    hub.close()
    assert [is_close(p) for p in _drain(queue)] == [False, False, True]
    hub.unsubscribe(queue)
    hub.publish("ready:")
    assert queue.empty()


def test_listening_needs_every_stream_the_store_reports() -> None:
    """PostgreSQL reports the listener of every run's end apart: while it is deaf, clients are
    not told that notices flow (they would wait for ends they cannot hear)."""
    hub = Hub(listening=False)
    hub.publish("listening:")
    hub.publish("listening:ends")
    assert hub.listening
    hub.publish("deaf:ends")
    assert not hub.listening
    hub.publish("listening:ends")
    assert hub.listening
