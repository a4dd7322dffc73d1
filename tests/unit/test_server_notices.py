"""The server's fan-out of wake-ups to Watch streams (notices written as their wire text)."""

from __future__ import annotations

from sagaway.server.notices import MAX_BACKLOG, Hub, Queue
from sagaway.store import notices

CLOSE = "<close>"


def _drain(queue: Queue) -> list[str]:
    items = []
    while not queue.empty():
        notice = queue.get_nowait()
        items.append(CLOSE if notice is None else notices.encode(notice))
    return items


def _publish(hub: Hub, text: str) -> None:
    notice = notices.decode(text)
    assert notice is not None, text
    hub.publish(notice)


def test_ready_is_queued_once_until_taken() -> None:
    hub = Hub(listening=True)
    queue = hub.subscribe()
    _publish(hub, "ready:")
    _publish(hub, "ready:")
    _publish(hub, "ended:r1")
    assert _drain(queue) == ["ready:", "ended:r1"]
    _publish(hub, "ready:")  # not taken yet: still pending
    hub.taken(queue, notices.READY)
    _publish(hub, "ready:")
    assert _drain(queue) == ["ready:"]


def test_a_stream_that_does_not_read_holds_a_bounded_backlog() -> None:
    hub = Hub(listening=True)
    stuck, reading = hub.subscribe(), hub.subscribe()
    for i in range(MAX_BACKLOG + 5):
        _publish(hub, f"ended:r{i}")
        if i % 100 == 0:
            _drain(reading)
    left = _drain(stuck)
    assert len(left) == 6
    assert left[0] == "listening:"  # what was dropped is found by looking again
    assert left[1:] == [f"ended:r{i}" for i in range(MAX_BACKLOG, MAX_BACKLOG + 5)]


def test_listening_state_and_close() -> None:
    hub = Hub(listening=False)
    queue = hub.subscribe()
    _publish(hub, "listening:")
    assert hub.listening
    _publish(hub, "deaf:")
    assert not hub.listening
    hub.close()
    assert _drain(queue) == ["listening:", "deaf:", CLOSE]
    hub.unsubscribe(queue)
    _publish(hub, "ready:")
    assert queue.empty()


def test_listening_needs_every_stream_the_store_reports() -> None:
    """PostgreSQL reports the listener of every run's end apart: while it is deaf, clients are
    not told that notices flow (they would wait for ends they cannot hear)."""
    hub = Hub(listening=False)
    _publish(hub, "listening:")
    _publish(hub, "listening:ends")
    assert hub.listening
    _publish(hub, "deaf:ends")
    assert not hub.listening
    _publish(hub, "listening:ends")
    assert hub.listening
