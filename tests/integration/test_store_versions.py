"""The Store contract of code versions on every backend (``db_url``: SQLite, PostgreSQL and the
Engine Server in front of either): an execution keeps the code version it was created with,
``claim_due`` and ``next_due`` take only the versions asked for (None in the set: unversioned
executions), a fork records the forking process's version, and listings filter by version.

Times are explicit (``now``), as the engine passes them, so no test sleeps.
"""

from __future__ import annotations

import dataclasses

from sagaway.states import WorkflowStatus
from sagaway.store import Store
from sagaway.store.records import ForkRequest, ListQuery, NewWorkflow
from tests.store_helpers import LEASE, T0, new, run_of


def _versioned(key: str, version: str | None) -> NewWorkflow:
    return dataclasses.replace(new(key), code_version=version)


async def _create(store: Store, *items: tuple[str, str | None], now: float = T0) -> None:
    for key, version in items:
        result = await store.create_workflow(
            _versioned(key, version), now=now, lease=None, replace_live=False
        )
        assert result.created


async def _claimed_keys(
    store: Store, versions: frozenset[str | None] | None, now: float = T0 + 1
) -> set[str]:
    claimed = await store.claim_due(
        owner="w", now=now, lease_timeout=LEASE, limit=10, exclude=(), versions=versions
    )
    return {record.key for record, _ in claimed}


async def test_create_keeps_the_code_version_for_every_reader(store: Store) -> None:
    result = await store.create_workflow(
        _versioned("k1", "2026.12.1"), now=T0, lease=None, replace_live=False
    )
    assert result.record.code_version == "2026.12.1"
    assert (await run_of(store, "k1")).code_version == "2026.12.1"
    assert (await store.get_run(result.record.run_id)).code_version == "2026.12.1"  # type: ignore[union-attr]
    [listed] = await store.list_workflows(status=None, limit=10)
    assert listed.code_version == "2026.12.1"
    plain = await store.create_workflow(new("k2"), now=T0, lease=None, replace_live=False)
    assert plain.record.code_version is None


async def test_claim_due_takes_only_the_versions_asked_for(store: Store) -> None:
    await _create(store, ("a1", "v1"), ("b2", "v2"), ("c0", None), ("d3", "v3"))
    assert await _claimed_keys(store, frozenset({"v2"})) == {"b2"}
    assert await _claimed_keys(store, frozenset({None})) == {"c0"}
    assert await _claimed_keys(store, frozenset({"v1", "v3"})) == {"a1", "d3"}
    assert await _claimed_keys(store, frozenset({"v1", "v2", None})) == set()  # all taken


async def test_claim_due_without_versions_takes_every_version(store: Store) -> None:
    await _create(store, ("a1", "v1"), ("b2", "v2"), ("c0", None))
    assert await _claimed_keys(store, None) == {"a1", "b2", "c0"}


async def test_claim_due_with_versions_and_queues_needs_both(store: Store) -> None:
    for key, version, queue in (
        ("a", "v1", "billing"),
        ("b", "v1", "default"),
        ("c", "v2", "billing"),
    ):
        created = await store.create_workflow(
            dataclasses.replace(new(key), code_version=version, queue=queue),
            now=T0,
            lease=None,
            replace_live=False,
        )
        assert created.created
    claimed = await store.claim_due(
        owner="w",
        now=T0 + 1,
        lease_timeout=LEASE,
        limit=10,
        exclude=(),
        queues=["billing"],
        versions=frozenset({"v1"}),
    )
    assert [record.key for record, _ in claimed] == ["a"]


async def test_next_due_honours_the_versions(store: Store) -> None:
    await _create(store, ("early-v1", "v1"), now=T0)
    await _create(store, ("late-v2", "v2"), now=T0 + 5)
    await _create(store, ("later-unversioned", None), now=T0 + 9)
    assert await store.next_due(owner="w") == T0
    assert await store.next_due(owner="w", versions=frozenset({"v2"})) == T0 + 5
    assert await store.next_due(owner="w", versions=frozenset({None})) == T0 + 9
    assert await store.next_due(owner="w", versions=frozenset({"v9"})) is None


async def test_list_page_filters_by_code_version(store: Store) -> None:
    for i, version in enumerate(["v1", "v2", None, "v1", "v2", None, "v1"]):
        await _create(store, (f"w{i}", version), now=T0 + i)

    async def keys(versions: frozenset[str | None], **kw: object) -> list[str]:
        page = await store.list_page(ListQuery(limit=100, code_versions=versions, **kw))  # type: ignore[arg-type]
        return [r.key for r in page]

    assert await keys(frozenset({"v1"})) == ["w6", "w3", "w0"]
    assert await keys(frozenset({None})) == ["w5", "w2"]
    assert await keys(frozenset({"v2", None})) == ["w5", "w4", "w2", "w1"]
    assert len(await keys(frozenset())) == 7  # empty: any version
    # Keyset paging with the filter: the second page continues after the first.
    first = await store.list_page(ListQuery(limit=2, code_versions=frozenset({"v1"})))
    assert [r.key for r in first] == ["w6", "w3"]
    after = (first[-1].created_at, first[-1].run_id)
    assert await keys(frozenset({"v1"}), after=after) == ["w0"]
    # Combined with another filter.
    assert await keys(frozenset({"v1"}), statuses=frozenset({WorkflowStatus.PENDING})) == [
        "w6",
        "w3",
        "w0",
    ]
    assert await keys(frozenset({"v1"}), key_prefix="w3") == ["w3"]


async def test_fork_records_the_forking_process_version(store: Store) -> None:
    await _create(store, ("src", "v1"))
    [(record, held)] = await store.claim_due(
        owner="w", now=T0, lease_timeout=LEASE, limit=1, exclude=()
    )
    await store.finish_workflow(
        record.run_id,
        token=held.token,
        status=WorkflowStatus.FAILED,
        result=None,
        error='"x"',
        now=T0 + 1,
    )
    result = await store.fork_workflow(
        ForkRequest(
            source_run_id=record.run_id,
            run_id="f" * 32,
            key="fork-v2",
            key_space="fork-v2/ks",
            call_ids=(),
            code_version="v2",
        ),
        now=T0 + 2,
    )
    assert result is not None and result.created
    assert result.record.code_version == "v2"
    unversioned = await store.fork_workflow(
        ForkRequest(
            source_run_id=record.run_id,
            run_id="e" * 32,
            key="fork-none",
            key_space="fork-none/ks",
            call_ids=(),
        ),
        now=T0 + 2,
    )
    assert unversioned is not None and unversioned.record.code_version is None
    assert await _claimed_keys(store, frozenset({"v2"}), now=T0 + 3) == {"fork-v2"}
