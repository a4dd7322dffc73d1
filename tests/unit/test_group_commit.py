"""GroupCommit: concurrent requests share writes, and each still gets its own answer."""

from __future__ import annotations

import asyncio

import pytest

from sagaway.store._group_commit import GroupCommit


class Recorder:
    """A fake batch writer: records each batch; items starting with "bad" make a batch fail."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.writing = asyncio.Event()

    async def write(self, batch: list[str]) -> list[str | BaseException]:
        self.batches.append(list(batch))
        self.writing.set()
        await self.gate.wait()
        if any(item.startswith("bad") for item in batch):
            raise ValueError("the database refused the batch")
        return [ValueError(f"{i} refused") if i.startswith("no") else i.upper() for i in batch]


async def test_requests_made_while_a_batch_is_written_share_the_next() -> None:
    recorder = Recorder()
    commits = GroupCommit(recorder.write, max_batch=3)
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
    commits = GroupCommit(recorder.write, max_batch=10)
    results = await asyncio.gather(
        *(commits.submit(x) for x in ("a", "no-1", "b")), return_exceptions=True
    )
    assert results[0] == "A" and results[2] == "B"
    assert isinstance(results[1], ValueError) and "no-1 refused" in str(results[1])


async def test_an_idle_request_is_written_at_once_by_its_own_task() -> None:
    recorder = Recorder()
    commits = GroupCommit(recorder.write, max_batch=10)
    assert await commits.submit("a") == "A"
    assert commits._writer is None  # no writer task, no hop: written in the caller's task
    assert recorder.batches == [["a"]]


async def test_a_batch_the_database_refuses_is_retried_item_by_item() -> None:
    recorder = Recorder()
    commits = GroupCommit(recorder.write, max_batch=10)
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
    commits = GroupCommit(recorder.write, max_batch=10, unique=lambda item: item[0])
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
    commits = GroupCommit(recorder.write, max_batch=10)
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
    commits = GroupCommit(recorder.write, max_batch=1)
    recorder.gate.clear()
    first = asyncio.ensure_future(commits.submit("a"))  # written alone, held at the gate
    await recorder.writing.wait()
    waiting = [asyncio.ensure_future(commits.submit(x)) for x in ("b", "c")]
    await asyncio.sleep(0)
    recorder.writing.clear()
    commits._start_writer()  # what the end of the write of "a" does
    if writing:
        await recorder.writing.wait()
    assert commits._writer is not None
    commits._writer.cancel()  # as when the event loop shuts down
    results = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    recorder.gate.set()
    assert await first == "A"
