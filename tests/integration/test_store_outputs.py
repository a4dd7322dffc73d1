"""Store contract of events, streams and search attributes, on SQLite, PostgreSQL and the Engine
Server in front of each: a publication is written with its step, fenced by the lease, once
however often it is sent; outputs are numbered in order (seq per run, offset per stream); reads
from an offset; the latest event value wins; search attributes are typed, replaced by name and
filter a listing; everything goes with its execution when it is purged."""

from __future__ import annotations

import pytest

from sagaway import errors
from sagaway.states import StepKind, WorkflowStatus
from sagaway.store import Store
from sagaway.store.records import (
    AttributeFilter,
    ListQuery,
    OutputWrite,
    Publication,
    SearchAttribute,
)
from tests.store_helpers import T0, run_of, running, step


def publication(
    run_id: str, call_id: str, *writes: tuple[str, str, str], attributes: tuple = ()
) -> Publication:
    return Publication(
        step=step(run_id, call_id, T0, kind=StepKind.PUBLISH, name="publish", result=None),
        outputs=tuple(OutputWrite(kind=k, name=n, value=v) for k, n, v in writes),
        attributes=attributes,
    )


async def test_outputs_are_numbered_in_order_and_read_from_an_offset(store: Store) -> None:
    held = await running(store, "order-1")
    run_id = (await run_of(store, "order-1")).run_id
    await store.publish(
        publication(run_id, "1", ("stream", "tokens", '"Hel"'), ("event", "phase", '"draft"')),
        token=held.token,
        now=T0 + 1,
    )
    await store.publish(
        publication(run_id, "2", ("stream", "tokens", '"lo"'), ("event", "phase", '"done"')),
        token=held.token,
        now=T0 + 2,
    )
    log = await store.read_outputs(run_id, after=0, limit=100)
    assert [(o.seq, o.kind, o.name, o.offset, o.value) for o in log] == [
        (1, "stream", "tokens", 0, '"Hel"'),
        (2, "event", "phase", 0, '"draft"'),
        (3, "stream", "tokens", 1, '"lo"'),
        (4, "event", "phase", 1, '"done"'),
    ]
    assert [o.seq for o in await store.read_outputs(run_id, after=2, limit=1)] == [3]
    items = await store.read_stream(run_id, stream="tokens", offset=1, limit=100)
    assert [(o.offset, o.value) for o in items] == [(1, '"lo"')]
    assert await store.read_stream(run_id, stream="tokens", offset=2, limit=100) == []
    assert await store.read_stream(run_id, stream="other", offset=0, limit=100) == []
    event = await store.get_event(run_id, key="phase")
    assert event is not None and event.value == '"done"' and event.offset == 1
    assert await store.get_event(run_id, key="missing") is None
    steps = {s.call_id: s for s in await store.load_steps(run_id)}
    assert steps["1"].kind is StepKind.PUBLISH and steps["2"].kind is StepKind.PUBLISH


async def test_a_publication_is_written_once_and_fenced(store: Store) -> None:
    held = await running(store, "order-1")
    run_id = (await run_of(store, "order-1")).run_id
    first = publication(run_id, "1", ("stream", "s", "1"))
    await store.publish(first, token=held.token, now=T0)
    # Sent again (a retry after a lost answer): its step is there, nothing is written twice.
    await store.publish(first, token=held.token, now=T0)
    assert [o.value for o in await store.read_stream(run_id, stream="s", offset=0, limit=9)] == [
        "1"
    ]
    with pytest.raises(errors.LeaseLost):
        await store.publish(
            publication(run_id, "2", ("stream", "s", "2")), token="not-the-lease", now=T0
        )
    assert len(await store.read_outputs(run_id, after=0, limit=9)) == 1


async def test_search_attributes_are_typed_replaced_and_filter_a_listing(store: Store) -> None:
    runs = {}
    for key, customer, amount, region in (
        ("o-1", "4711", 120.5, "eu"),
        ("o-2", "4712", 80.0, "eu"),
        ("o-3", "4711", 9.0, "us"),
    ):
        held = await running(store, key)
        run_id = (await run_of(store, key)).run_id
        runs[key] = run_id
        attrs = (
            SearchAttribute(name="customer", kind="str", text=customer),
            SearchAttribute(name="amount", kind="float", number=amount),
            SearchAttribute(name="region", kind="str", text="xx"),
        )
        await store.publish(publication(run_id, "1", attributes=attrs), token=held.token, now=T0)
        # Set again: the latest value of a name replaces the earlier one.
        again = (SearchAttribute(name="region", kind="str", text=region),)
        await store.publish(publication(run_id, "2", attributes=again), token=held.token, now=T0)

    listed = await store.list_search_attributes(runs["o-1"])
    assert [(a.name, a.kind, a.text, a.number) for a in listed] == [
        ("amount", "float", None, 120.5),
        ("customer", "str", "4711", None),
        ("region", "str", "eu", None),
    ]

    async def keys(*filters: AttributeFilter, **query: object) -> set[str]:
        page = await store.list_page(ListQuery(limit=100, attributes=filters, **query))  # type: ignore[arg-type]
        return {r.key for r in page}

    assert await keys(AttributeFilter(name="customer", text="4711")) == {"o-1", "o-3"}
    assert await keys(
        AttributeFilter(name="customer", text="4711"), AttributeFilter(name="region", text="eu")
    ) == {"o-1"}
    assert await keys(AttributeFilter(name="amount", op=">=", number=80.0)) == {"o-1", "o-2"}
    assert await keys(AttributeFilter(name="amount", op="<", number=80.0)) == {"o-3"}
    # A value that may be either type (a CLI's `customer=4711`) matches either.
    assert await keys(AttributeFilter(name="customer", text="4711", number=4711.0)) == {
        "o-1",
        "o-3",
    }
    assert await keys(AttributeFilter(name="region", text="eu"), name="nope") == set()
    assert await keys(
        AttributeFilter(name="region", text="eu"), statuses=frozenset({WorkflowStatus.RUNNING})
    ) == {"o-1", "o-2"}
    with pytest.raises(ValueError):
        await keys(AttributeFilter(name="region", op="; DROP", text="eu"))


async def test_outputs_and_attributes_go_with_their_execution(store: Store) -> None:
    held = await running(store, "order-1")
    run_id = (await run_of(store, "order-1")).run_id
    attrs = (SearchAttribute(name="customer", kind="str", text="4711"),)
    await store.publish(
        publication(run_id, "1", ("event", "e", "1"), attributes=attrs),
        token=held.token,
        now=T0,
    )
    await store.finish_workflow(
        run_id, token=held.token, status=WorkflowStatus.COMPLETED, result="1", error=None, now=T0
    )
    assert await store.purge_ended(before=T0 + 10, statuses=None, limit=10) == [run_id]
    assert await store.read_outputs(run_id, after=0, limit=10) == []
    assert await store.list_search_attributes(run_id) == []
    filters = (AttributeFilter(name="customer", text="4711"),)
    assert await store.list_page(ListQuery(limit=10, attributes=filters)) == []
