from __future__ import annotations

import pytest

import sagaway as sw


def test_duplicate_names_are_refused() -> None:
    manager = sw.Manager("sqlite:///unused.db")

    @manager.register_activity(name="x")
    async def a() -> None: ...

    with pytest.raises(sw.AlreadyRegistered, match="'x' is already registered"):

        @manager.register_activity(name="x")
        async def b() -> None: ...


def test_workflows_must_be_async() -> None:
    manager = sw.Manager("sqlite:///unused.db")
    with pytest.raises(TypeError, match="must be an async function"):

        @manager.register_workflow
        def sync_flow() -> None: ...


def test_unknown_queue_is_refused_at_registration() -> None:
    manager = sw.Manager("sqlite:///unused.db", queues={"payment": sw.Queue(concurrency=2)})
    with pytest.raises(ValueError, match="queue 'paymnt' is not configured"):

        @manager.register_activity(queue="paymnt")
        async def charge() -> None: ...


def test_registered_activity_runs_directly_outside_workflows() -> None:
    manager = sw.Manager("sqlite:///unused.db")

    @manager.register_activity
    def add(a: int, b: int) -> int:
        return a + b

    assert add(1, 2) == 3
    assert manager.registry.activity(add).name.endswith("add")
    with pytest.raises(sw.NotRegistered, match="registered as an activity"):
        manager.registry.workflow(add)  # sagaway: ignore[SW202]


async def test_using_a_closed_manager_says_how_to_open_it() -> None:
    manager = sw.Manager("sqlite:///unused.db")

    @manager.register_workflow
    async def flow() -> None: ...

    with pytest.raises(sw.ManagerStateError, match="async with manager"):
        await manager.workflow(flow).execute()
    with pytest.raises(sw.SagawayError, match="inside a workflow"):
        await manager.activity("x").execute_get()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lease_timeout": 0}, "lease_timeout"),
        ({"concurrency": 0}, "concurrency"),
        ({"payload_limit": 10}, "payload_limit"),
    ],
)
def test_invalid_manager_options(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sw.Manager("sqlite:///unused.db", **kwargs)  # type: ignore[arg-type]


def test_unsupported_url() -> None:
    from sagaway.store import open_store

    with pytest.raises(ValueError, match="unsupported database URL"):
        open_store("mysql://x")
    with pytest.raises(ValueError, match="grpc://HOST:PORT"):
        open_store("grpc://127.0.0.1")  # no port
    with pytest.raises(ValueError, match="carries no credentials"):
        open_store("grpc://user:secret@127.0.0.1:7233")
    with pytest.raises(ValueError, match="unknown Engine Server URL parameter"):
        open_store("grpc://127.0.0.1:7233?tls=1")
    with pytest.raises(ValueError, match="use grpcs://"):
        open_store("grpc://127.0.0.1:7233?ca=/x.pem")
    with pytest.raises(ValueError, match="Engine Server URL"):
        sw.Manager("sqlite:///x.db", token="t")
    assert type(open_store("grpc://127.0.0.1:7233")).__name__ == "GrpcStore"


def test_task_queue_and_its_old_spelling() -> None:
    manager = sw.Manager("sqlite:///unused.db")

    @manager.register_workflow(task_queue="billing")
    async def invoice() -> None: ...

    with pytest.warns(DeprecationWarning, match="task_queue"):

        @manager.register_workflow(queue="shipping")
        async def ship() -> None: ...

    assert manager.registry.workflow(invoice).task_queue == "billing"
    assert manager.registry.workflow(ship).task_queue == "shipping"
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="disagree"):

        @manager.register_workflow(task_queue="a", queue="b")
        async def both() -> None: ...

    with pytest.warns(DeprecationWarning, match="task_queues"):
        manager.workflow_queues = frozenset({"billing"})
    assert manager.task_queues == frozenset({"billing"})
    with pytest.warns(DeprecationWarning):
        assert manager.workflow_queues == frozenset({"billing"})
