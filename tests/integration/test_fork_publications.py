"""A fork carries over what its kept publish steps published, on SQLite, PostgreSQL and the
Engine Server in front of each: the kept steps are replayed, not run again, so their events,
stream items (at the same offsets, before the fork's own) and search attributes are copied
into the fork with them, in the fork's transaction; a fork from before a publish step carries
none of it; values an encrypting codec sealed for the source's run are sealed again for the
fork's and read there in clear; a fork that fails between the copy and its commit leaves
nothing behind."""

from __future__ import annotations

from typing import Any

import pytest

import sagaway as sw
from sagaway.store import Store
from sagaway.store.records import ForkPayloads, ForkRequest, OutputPayload

BUG = {"on": True}


class CheckBug(sw.CompletableError):
    """The check (step 5) has a bug: the workflow fails there."""


def build(db_url: str, **options: Any) -> sw.Manager:
    options.setdefault("poll_interval", 0.05)
    options.setdefault("recovery_interval", 0.1)
    m = sw.Manager(db_url, **options)

    @m.register_activity(name="check")
    async def check(order: int) -> str:
        if BUG["on"]:
            raise CheckBug("bug in step 5", code="BUG")
        return "checked"

    @m.register_workflow(name="report")
    async def report(order: int) -> str:
        await sw.set_event("phase", "collecting")  # step 1
        await sw.write_stream("log", f"order {order}", "collected")  # step 2
        await sw.set_search_attributes(order=order, stage="collected")  # step 3
        await sw.set_event("phase", "checking")  # step 4
        checked = await m.activity(check, order).execute_get()  # step 5
        await sw.write_stream("log", checked)
        await sw.set_search_attributes(stage="done")
        await sw.set_event("phase", "done")
        return "ok"

    return m


async def _failed(m: sw.Manager, key: str) -> None:
    BUG["on"] = True
    with pytest.raises(CheckBug):
        await m.workflow("report", 7).execute_get(idempotency_key=key)
    BUG["on"] = False


async def _stream(handle: Any) -> list[tuple[int, Any]]:
    return [(i.offset, i.value) async for i in handle.read_stream("log")]


async def _outputs(handle: Any) -> list[tuple[int, str, str, int, Any]]:
    return [(o.seq, o.kind, o.name, o.offset, o.value) async for o in handle.outputs()]


async def _forked_keeping_the_publications(m: sw.Manager, key: str) -> None:
    """The source failed at its step 5 (after four publish steps); the fork from step 5 keeps
    them and publishes, after what they published, what it runs itself."""
    await _failed(m, key)
    source = m.get_workflow(key)
    assert await _stream(source) == [(0, "order 7"), (1, "collected")]

    fork = await m.fork(key, from_step=5, new_key=f"{key}-fixed")
    assert await fork.result(timeout=20) == "ok"
    # The kept items at the source's offsets, then the fork's own: no gap, none twice.
    assert await _stream(fork) == [(0, "order 7"), (1, "collected"), (2, "checked")]
    assert [v async for v in _values(fork, offset=2)] == ["checked"]
    assert await _outputs(fork) == [
        (1, "event", "phase", 0, "collecting"),
        (2, "stream", "log", 0, "order 7"),
        (3, "stream", "log", 1, "collected"),
        (4, "event", "phase", 1, "checking"),
        (5, "stream", "log", 2, "checked"),
        (6, "event", "phase", 2, "done"),
    ]
    assert await fork.get_event("phase") == "done"
    assert await fork.search_attributes() == {"order": 7, "stage": "done"}
    # Listed by the attributes it carried over (the source too: both have them).
    listed = [d.key for d in await m.list_workflows(where={"order": 7})]
    assert sorted(listed) == [key, f"{key}-fixed"]
    # The source is untouched.
    assert await _stream(source) == [(0, "order 7"), (1, "collected")]
    assert await source.get_event("phase") == "checking"
    assert await source.search_attributes() == {"order": 7, "stage": "collected"}


async def _values(handle: Any, *, offset: int) -> Any:
    async for item in handle.read_stream("log", offset=offset):
        yield item.value


async def test_a_fork_keeping_publish_steps_has_what_they_published(db_url: str) -> None:
    m = build(db_url)
    async with m:
        await _forked_keeping_the_publications(m, "rep-1")


async def test_a_fork_from_before_the_publish_steps_has_none_of_it(db_url: str) -> None:
    m = build(db_url)
    async with m:
        await _failed(m, "rep-2")
        # From step 1: keeps nothing; the whole workflow publishes again (and fails again).
        BUG["on"] = True
        whole = await m.fork("rep-2", from_step=1, new_key="rep-2-from-1")
        with pytest.raises(CheckBug):
            await whole.result(timeout=20)
        BUG["on"] = False
        # From step 3: keeps step 1 (the event) and 2 (the stream items), not the attributes.
        partial = await m.fork("rep-2", from_step=3, new_key="rep-2-from-3")
        assert await partial.result(timeout=20) == "ok"
        assert await _outputs(whole) == [
            (1, "event", "phase", 0, "collecting"),
            (2, "stream", "log", 0, "order 7"),
            (3, "stream", "log", 1, "collected"),
            (4, "event", "phase", 1, "checking"),
        ]  # each once: written by the fork itself, nothing copied
        assert await whole.search_attributes() == {"order": 7, "stage": "collected"}
        assert await _stream(partial) == [(0, "order 7"), (1, "collected"), (2, "checked")]
        assert await partial.search_attributes() == {"order": 7, "stage": "done"}
        # A fork keeping only step 1: the event, but not the stream items of step 2.
        only_event = await m.fork("rep-2", from_step=2, new_key="rep-2-from-2")
        assert await only_event.result(timeout=20) == "ok"
        log = await _outputs(only_event)
        assert log[0] == (1, "event", "phase", 0, "collecting")
        assert [(o[3], o[4]) for o in log if o[2] == "log"] == [
            (0, "order 7"),
            (1, "collected"),
            (2, "checked"),
        ]  # written by the fork (step 2 ran again), each once


async def test_sealed_values_are_sealed_again_for_the_fork(db_url: str) -> None:
    """With an encrypting codec the source's values are bound to its run: the fork's copies are
    sealed again for the fork's run, and read there in clear."""
    key = sw.codecs.Encrypt.generate_key()
    m = build(db_url, codec=[sw.codecs.Encrypt(keys=[key])])
    async with m:
        await _forked_keeping_the_publications(m, "rep-3")
    # A process without the key cannot fork it (the values cannot be sealed again).
    bare = build(db_url)
    async with bare:
        with pytest.raises(sw.PayloadKeyError):
            await bare.fork("rep-3", from_step=5, new_key="rep-3-bare")
        with pytest.raises(sw.WorkflowNotFound):
            await bare.get_workflow("rep-3-bare").status()


async def test_a_fork_failing_before_its_commit_leaves_nothing_half_copied(db_url: str) -> None:
    """The copy is in the fork's transaction: a fork that fails after its steps and outputs
    were written (its payloads name a value no kept step wrote: refused at the end) creates
    nothing; made again, it has everything once."""
    m = build(db_url)
    async with m:
        await _failed(m, "rep-4")
        store: Store = m._require_engine().store
        source = await store.get_workflow("rep-4")
        assert source is not None
        request = ForkRequest(
            source_run_id=source.run_id,
            run_id="rep-4-fork-run",
            key="rep-4-fork",
            key_space="rep-4-fork@rep-4-fork-run",
            call_ids=("1", "2", "3", "4"),
            payloads=ForkPayloads(args=source.args, outputs=(OutputPayload(99, '"forged"'),)),
        )
        with pytest.raises(Exception, match="does not copy"):
            await store.fork_workflow(request, now=source.updated_at + 1)
        assert await store.get_workflow("rep-4-fork") is None
        assert await store.read_outputs("rep-4-fork-run", after=0, limit=-1) == []
        assert await store.list_search_attributes("rep-4-fork-run") == []

        made = await store.fork_workflow(
            ForkRequest(**{**_fields(request), "payloads": None}), now=source.updated_at + 1
        )
        assert made is not None and made.created
        fork = m.get_workflow("rep-4-fork")
        assert await fork.result(timeout=20) == "ok"
        assert await _stream(fork) == [(0, "order 7"), (1, "collected"), (2, "checked")]
        assert await fork.search_attributes() == {"order": 7, "stage": "done"}


def _fields(request: ForkRequest) -> dict[str, Any]:
    return {name: getattr(request, name) for name in request.__dataclass_fields__}
