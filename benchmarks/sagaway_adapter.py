"""Sagaway's side of the order-saga workload: the workflow, its activities, open/start/result.

The adapter shape of ``benchmarks/WORKLOAD.md`` §5: ``open()``, ``start(wf_id, fail_step)`` (a
durable start under that id: the workflow id is Sagaway's idempotency key), ``result(handle)``,
``wait_all(ids)`` (recovery: a Manager with workers in a new process waits for each id's handle,
never starting anything; the Recovery Worker takes the dead process's workflows over when their
lease expires), ``close()``.

The benchmark uses ``lease_timeout=5`` s (``LEASE_TIMEOUT``) in every scenario, so that scenario C
measures a take-over after a 5 s lease rather than the 30 s default.

Activities: sync or async
-------------------------
Each activity's only work is one blocking sqlite3 upsert (about 0.1 ms), so either way it runs on a
thread, through the bounded connection pool of ``workload.Services``:

* ``async`` (the default): ``async def`` activities doing ``await asyncio.to_thread(...)``, on
  asyncio's default executor (``min(32, nproc + 4)`` threads: 6 on a 2-core machine).
* ``sync``: plain ``def`` activities, which the engine runs in its own thread pool
  (``Manager(activity_threads=32)``, the default).

Both make one hop from the event loop to a thread and back. Measured on the project machine
(2 cores, 6 alternating runs of A_thr and B_thr each, see README.md) ``async`` was faster:
A_thr median ~1315 vs ~1230 wf/s, B_thr ~970 vs ~870 wf/s, A_seq equal. The likely reason is the
thread count: with 100 workflows in flight, the sync variant keeps up to 32 threads busy (most of
them waiting for one of the 8 pooled connections per service) fighting for the GIL on 2 cores,
while to_thread caps it at 6.
So async is the default; ``--activities sync`` keeps the other variant runnable.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

import sagaway as sw
from benchmarks import workload
from benchmarks.workload import Services

if TYPE_CHECKING:
    from benchmarks.sagaway_telemetry import Telemetry

RETRY = sw.RetryPolicy(
    maximum_attempts=workload.RETRY_MAXIMUM_ATTEMPTS,
    initial_interval=workload.RETRY_INITIAL_INTERVAL,
    backoff_coefficient=workload.RETRY_BACKOFF_COEFFICIENT,
)


class PaymentDeclined(sw.CompletableError):
    """The payment was declined (a business error: completable, never retried)."""


LEASE_TIMEOUT = 5.0
"""Seconds: the benchmark's ``Manager(lease_timeout=...)`` (default 30 s)."""


@dataclasses.dataclass(frozen=True)
class ManagerSettings:
    """The Manager arguments the benchmark uses; everything not listed is the default."""

    url: str
    activities: str = "async"
    lease_timeout: float = LEASE_TIMEOUT
    poll_interval: float | None = None
    """None: the Manager's default."""
    token: str | None = None
    """grpc:// only: the Engine Server's bearer token."""
    codec: str = "none"
    """``encrypt``: every payload sealed with ``sw.codecs.Encrypt`` (a fresh key per process)."""

    def manager(self) -> sw.Manager:
        kwargs: dict[str, Any] = {"lease_timeout": self.lease_timeout}
        if self.token is not None:
            kwargs["token"] = self.token
        if self.poll_interval is not None:
            kwargs["poll_interval"] = self.poll_interval
        if self.codec == "encrypt":
            kwargs["codec"] = sw.codecs.Encrypt(keys=[sw.codecs.Encrypt.generate_key()])
        return sw.Manager(self.url, **kwargs)

    def as_record(self) -> dict[str, Any]:
        """The settings that matter, for the JSON results (defaults read from the signature)."""
        params = inspect.signature(sw.Manager.__init__).parameters
        defaults = {
            name: p.default
            for name, p in params.items()
            if name not in ("self", "url", "clock", "error_marshaler", "queues", "token")
            and p.default is not inspect.Parameter.empty
        }
        record: dict[str, Any] = {"url": _display_url(self.url), **defaults}
        record["lease_timeout"] = self.lease_timeout
        if self.poll_interval is not None:
            record["poll_interval"] = self.poll_interval
        record["activities"] = self.activities
        record["codec"] = self.codec
        record["activity_retry"] = dataclasses.asdict(RETRY)
        record["error_marshaler"] = "default"
        record["queues"] = None
        if self.token is not None:
            record["token"] = "set (redacted)"
        if self.url.startswith("sqlite"):
            record["sqlite_synchronous"] = "normal (store default)"
        return record


def _display_url(url: str) -> str:
    if "@" in url and url.startswith("postgres"):
        scheme, rest = url.split("://", 1)
        user_info, host = rest.rsplit("@", 1)
        return f"{scheme}://{user_info.partition(':')[0]}@{host}"
    return url


Workflow = Callable[[str, str | None], Coroutine[Any, Any, dict[str, Any]]]


def build(manager: sw.Manager, services: Services, activities: str = "async") -> Workflow:
    """Register ``order_saga`` and its activities on ``manager``; returns the workflow."""
    if activities not in ("sync", "async"):
        raise ValueError(f"activities must be 'sync' or 'async', not {activities!r}")

    def register(step: str) -> Callable[..., Any]:
        if activities == "sync":

            def sync_activity(wf_id: str) -> None:
                services.perform(step, wf_id)

            sync_activity.__name__ = step
            return manager.register_activity(name=step, retry=RETRY)(sync_activity)

        async def async_activity(wf_id: str) -> None:
            await services.aperform(step, wf_id)

        async_activity.__name__ = step
        return manager.register_activity(name=step, retry=RETRY)(async_activity)

    create_order = register("create_order")
    reserve_stock = register("reserve_stock")
    arrange_shipping = register("arrange_shipping")
    cancel_order = register("cancel_order")
    release_stock = register("release_stock")

    # charge_payment takes the failure flag; it raises before any side effect.
    charge_payment: Callable[..., Any]
    if activities == "sync":

        def charge_payment_sync(wf_id: str, fail: bool) -> None:
            if fail:
                raise PaymentDeclined(f"payment of {wf_id} declined", code="DECLINED")
            services.perform("charge_payment", wf_id)

        charge_payment = manager.register_activity(name="charge_payment", retry=RETRY)(
            charge_payment_sync
        )
    else:

        async def charge_payment_async(wf_id: str, fail: bool) -> None:
            if fail:
                raise PaymentDeclined(f"payment of {wf_id} declined", code="DECLINED")
            await services.aperform("charge_payment", wf_id)

        charge_payment = manager.register_activity(name="charge_payment", retry=RETRY)(
            charge_payment_async
        )

    @manager.register_workflow(name="order_saga")
    async def order_saga(wf_id: str, fail_step: str | None) -> dict[str, Any]:
        done: list[str] = []
        saga = sw.Saga()
        try:
            async with saga:  # on a completable error: compensations in reverse, then re-raise
                await manager.activity(create_order, wf_id).execute_get()
                done.append("create_order")
                saga.add_compensation(cancel_order, wf_id)
                await manager.activity(reserve_stock, wf_id).execute_get()
                done.append("reserve_stock")
                saga.add_compensation(release_stock, wf_id)
                fail = fail_step == "charge_payment"
                await manager.activity(charge_payment, wf_id, fail).execute_get()
                done.append("charge_payment")
                await manager.activity(arrange_shipping, wf_id).execute_get()
                done.append("arrange_shipping")
        except PaymentDeclined:
            return {
                "status": "compensated",
                "failed_step": "charge_payment",
                "compensated": [
                    workload.COMPENSATION_OF[s]
                    for s in reversed(done)
                    if s in workload.COMPENSATION_OF
                ],
            }
        return {"status": "completed", "steps": done}

    return order_saga


class SagawayAdapter:
    """Open a Manager (store + Worker + Recovery Worker in this process), start, wait, close.

    ``config``: ``url``, optionally ``activities`` (``async``/``sync``), ``lease_timeout``,
    ``poll_interval``, ``client_only`` (open with ``manager.connect()``: no workers here, the
    3-worker-process variant) and ``telemetry`` (``on``: metrics and tracing enabled before the
    Manager opens, see ``benchmarks.sagaway_telemetry``).
    """

    name = "sagaway"

    def __init__(self, config: dict[str, Any], services: Services) -> None:
        self.settings = ManagerSettings(
            url=config["url"],
            activities=config.get("activities", "async"),
            lease_timeout=config.get("lease_timeout", LEASE_TIMEOUT),
            poll_interval=config.get("poll_interval"),
            token=config.get("token"),
            codec=config.get("codec", "none"),
        )
        self.client_only: bool = config.get("client_only", False)
        self.telemetry_on = config.get("telemetry", "off") == "on"
        self.trace_ratio = float(config.get("trace_ratio", "1.0"))
        self._telemetry: Telemetry | None = None
        self.manager = self.settings.manager()
        self.workflow = build(self.manager, services, self.settings.activities)
        self._connection: Any = None

    async def open(self, recover: bool = False) -> None:
        if self.telemetry_on and self._telemetry is None:
            from benchmarks.sagaway_telemetry import Telemetry

            self._telemetry = Telemetry(self.trace_ratio)
        # Recovery needs nothing special: a Manager with workers claims what is due.
        if self.client_only:
            self._connection = self.manager.connect()
            await self._connection.__aenter__()
        else:
            await self.manager.__aenter__()

    async def start(self, wf_id: str, fail_step: str | None) -> sw.WorkflowHandle[dict[str, Any]]:
        return await self.manager.workflow(self.workflow, wf_id, fail_step).execute(
            idempotency_key=wf_id
        )

    async def result(self, handle: sw.WorkflowHandle[dict[str, Any]]) -> dict[str, Any]:
        return await handle.result()

    async def wait_all(self, ids: Sequence[str]) -> dict[str, Any]:
        """Wait for every id (never start one); id -> result, or the error as a string."""

        async def one(wf_id: str) -> Any:
            try:
                return await self.manager.get_workflow(wf_id).result()
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"

        results = await asyncio.gather(*(one(i) for i in ids))
        return dict(zip(ids, results, strict=True))

    async def counts(self) -> dict[str, int]:
        """Workflows per status in the engine's database."""
        by_status = await self.manager.count_workflows()
        return {status.value: n for status, n in by_status.items()}

    def describe(self) -> dict[str, Any]:
        record = self.settings.as_record()
        record["version"] = sw.__version__
        record["client_only"] = self.client_only
        record["telemetry"] = "on" if self.telemetry_on else "off"
        return record

    def telemetry_record(self) -> dict[str, Any]:
        """What telemetry did in this process (after ``close``: the spans exported)."""
        if self._telemetry is None:
            return {"telemetry": "on" if self.telemetry_on else "off"}
        return self._telemetry.record()

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.__aexit__(None, None, None)
            self._connection = None
        else:
            await self.manager.close()
        if self._telemetry is not None:
            self._telemetry.close()
