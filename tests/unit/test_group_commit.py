"""GroupCommit: concurrent requests share writes, and each still gets its own answer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from sagaway.store._group_commit import GroupCommit


class Recorder:
    """A fake batch writer: records each batch; items starting with "bad" make a batch fail."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.writing = asyncio.Event()
        self.after_write: Callable[[], object] = lambda: None

    async def write(self, batch: list[str]) -> list[str | BaseException]:
        self.batches.append(list(batch))
        self.writing.set()
        await self.gate.wait()
        self.after_write()
        if any(item.startswith("bad") for item in batch):
            raise ValueError("the database refused the batch")
        return [ValueError(f"{i} refused") if i.startswith("no") else i.upper() for i in batch]


async def test_requests_made_while_a_batch_is_written_share_the_next() -> None:
    recorder = Recorder()
    commits = GroupCommit(recorder.write, name="test", max_batch=3)
    recorder.gate.clear()
    first = asyncio.ensure_future(commits.submit("a"))
    await asyncio.sleep(0)  # the writer takes "a" alone and blocks on the gate
    rest = [asyncio.ensure_future(commits.submit(x)) for x in ("b", "c", "d", "e")]
    await asyncio.sleep(0)
    recorder.gate.set()
    assert await first == "A"
    assert await asyncio.gather(*rest) == ["B", "C", "D", "E"]
    assert recorder.batches == [["a"], ["b", "c", "d"], ["e"]]  # max_batch, order kept


async def test_an_item_refused_alone_fails_alone() -> None:
    recorder = Recorder()
    commits = GroupCommit(recorder.write, name="test", max_batch=10)
    results = await asyncio.gather(
        *(commits.submit(x) for x in ("a", "no-1", "b")), return_exceptions=True
    )
    assert results[0] == "A" and results[2] == "B"
    assert isinstance(results[1], ValueError) and "no-1 refused" in str(results[1])


async def test_an_idle_request_is_written_at_once_by_its_own_task() -> None:
    recorder = Recorder()
    commits = GroupCommit(recorder.write, name="test", max_batch=10)
    assert await commits.submit("a") == "A"
    assert commits._writer is None  # no writer task, no hop: written in the caller's task
    assert recorder.batches == [["a"]]


async def test_a_batch_the_database_refuses_is_retried_item_by_item() -> None:
    recorder = Recorder()
    commits = GroupCommit(recorder.write, name="test", max_batch=10)
    recorder.gate.clear()
    first = asyncio.ensure_future(commits.submit("a"))  # written at once, held at the gate
    await recorder.writing.wait()
    rest = [asyncio.ensure_future(commits.submit(x)) for x in ("x", "bad", "b")]
    await asyncio.sleep(0)
    recorder.gate.set()
    assert await first == "A"
    results = await asyncio.gather(*rest, return_exceptions=True)
    assert results[0] == "X" and results[2] == "B"
    assert isinstance(results[1], ValueError)
    assert recorder.batches == [["a"], ["x", "bad", "b"], ["x"], ["bad"], ["b"]]


async def test_equal_keys_never_share_a_batch_and_keep_their_order() -> None:
    recorder = Recorder()
    commits = GroupCommit(recorder.write, name="test", max_batch=10, unique=lambda item: item[0])
    recorder.gate.clear()
    first = asyncio.ensure_future(commits.submit("x0"))  # written at once, held at the gate
    await recorder.writing.wait()
    rest = asyncio.gather(*(commits.submit(x) for x in ("x1", "y1", "x2", "x3")))
    await asyncio.sleep(0)
    recorder.gate.set()
    assert await first == "X0"
    assert await rest == ["X1", "Y1", "X2", "X3"]
    assert recorder.batches == [["x0"], ["x1", "y1"], ["x2"], ["x3"]]


async def test_a_cancelled_caller_does_not_disturb_the_others() -> None:
    recorder = Recorder()
    commits = GroupCommit(recorder.write, name="test", max_batch=10)
    recorder.gate.clear()
    gone = asyncio.ensure_future(commits.submit("a"))
    kept = asyncio.ensure_future(commits.submit("b"))
    await asyncio.sleep(0)
    gone.cancel()
    recorder.gate.set()
    assert await kept == "B"
    with pytest.raises(asyncio.CancelledError):
        await gone


@pytest.mark.parametrize("writing", [False, True], ids=["before-it-starts", "while-writing"])
async def test_a_stopped_writer_answers_every_waiting_request(writing: bool) -> None:
    recorder = Recorder()
    commits = GroupCommit(recorder.write, name="test", max_batch=1)
    recorder.gate.clear()
    first = asyncio.ensure_future(commits.submit("a"))  # written alone, held at the gate
    await recorder.writing.wait()
    waiting = [asyncio.ensure_future(commits.submit(x)) for x in ("b", "c")]
    await asyncio.sleep(0)
    assert commits._writer is None  # they wait for the write of "a" to end
    loop = asyncio.get_running_loop()

    def stop_writer() -> None:  # as when the event loop shuts down
        assert commits._writer is not None
        commits._writer.cancel()

    if writing:
        recorder.writing.clear()
        recorder.gate.set()  # lets "a" through (its waiter is already woken)...
        recorder.gate.clear()  # ...but not what comes next
        assert await first == "A"  # its end started the writer, which writes "b"...
        await recorder.writing.wait()  # ...and is held at the gate
        stop_writer()
    else:
        # Runs right after the write of "a" returns: before the writer it starts has run.
        recorder.after_write = lambda: loop.call_soon(stop_writer)
        recorder.gate.set()
        assert await first == "A"
    results = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    assert recorder.batches == ([["a"], ["b"]] if writing else [["a"]])


async def test_a_failed_write_alone_still_starts_the_writer_for_what_queued() -> None:
    recorder = Recorder()
    commits = GroupCommit(recorder.write, name="test", max_batch=10)
    recorder.gate.clear()
    first = asyncio.ensure_future(commits.submit("bad-a"))
    await recorder.writing.wait()
    rest = asyncio.gather(*(commits.submit(x) for x in ("b", "c")))
    await asyncio.sleep(0)
    recorder.gate.set()
    with pytest.raises(ValueError, match="refused the batch"):
        await first
    assert await rest == ["B", "C"]
    assert recorder.batches == [["bad-a"], ["b", "c"]]
