"""sagaway.toolkit.idempotency on SQLite and PostgreSQL: once per key, concurrent repeats, TTL."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import pytest

from sagaway.testing import FakeClock
from sagaway.toolkit import idempotency, localdb
from tests.toolkit.conftest import ServiceDB


@dataclasses.dataclass(frozen=True)
class Charge:
    account: str
    amount: int
    charge_no: int


def setup(db: ServiceDB, keys: idempotency.IdempotencyKeys) -> Any:
    conn = db.connect()
    keys.install(conn)
    with localdb.transaction(conn):
        conn.execute(
            "CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER, charges INTEGER)"
        )
        conn.execute(f"INSERT INTO accounts VALUES ({db.param}, {db.param}, 0)", ("acct-1", 1000))
    return conn


def charge(db: ServiceDB, conn: Any, keys: idempotency.IdempotencyKeys, key: str, amount: int,
           on_apply: Any = None) -> Charge:  # fmt: skip
    def apply() -> Charge:
        if on_apply is not None:
            on_apply()
        conn.execute(
            f"UPDATE accounts SET balance = balance - {db.param}, charges = charges + 1 "
            f"WHERE id = {db.param}",
            (amount, "acct-1"),
        )
        (count,) = conn.execute(
            f"SELECT charges FROM accounts WHERE id = {db.param}", ("acct-1",)
        ).fetchone()
        return Charge("acct-1", amount, count)

    return keys.run(conn, key, apply, request={"account": "acct-1", "amount": amount})


def service_db_is_postgres(db: ServiceDB) -> bool:
    return db.dialect is localdb.Dialect.POSTGRES


def balance(db: ServiceDB, conn: Any) -> tuple[int, int]:
    row = conn.execute(
        f"SELECT balance, charges FROM accounts WHERE id = {db.param}", ("acct-1",)
    ).fetchone()
    if service_db_is_postgres(db):
        conn.commit()  # end psycopg's implicit read transaction
    return int(row[0]), int(row[1])


def test_repeats_return_the_stored_response_without_running(service_db: ServiceDB) -> None:
    keys = idempotency.IdempotencyKeys()
    conn = setup(service_db, keys)
    first = charge(service_db, conn, keys, "wf-1/2", 300)
    again = charge(service_db, conn, keys, "wf-1/2", 300)
    assert first == again == Charge("acct-1", 300, 1)
    assert isinstance(again, Charge)  # decoded by the operation's return annotation
    assert balance(service_db, conn) == (700, 1)
    other = charge(service_db, conn, keys, "wf-2/2", 100)
    assert other.charge_no == 2 and balance(service_db, conn) == (600, 2)


def test_the_key_commits_and_rolls_back_with_the_callers_transaction(
    service_db: ServiceDB,
) -> None:
    keys = idempotency.IdempotencyKeys()
    conn = setup(service_db, keys)

    class Abort(Exception):
        pass

    with pytest.raises(Abort), localdb.transaction(conn):
        charge(service_db, conn, keys, "k", 300)
        raise Abort  # the caller's transaction rolls back: the charge and its key with it
    assert balance(service_db, conn) == (1000, 0)
    assert charge(service_db, conn, keys, "k", 300).charge_no == 1
    assert balance(service_db, conn) == (700, 1)


def test_a_failing_operation_leaves_no_key_even_if_the_caller_commits(
    service_db: ServiceDB,
) -> None:
    keys = idempotency.IdempotencyKeys()
    conn = setup(service_db, keys)

    def boom() -> None:
        raise RuntimeError("payment provider down")

    with localdb.transaction(conn), pytest.raises(RuntimeError):
        charge(service_db, conn, keys, "k", 300, on_apply=boom)
        # the caller swallows the error and commits its own work
    assert balance(service_db, conn) == (1000, 0)
    assert charge(service_db, conn, keys, "k", 300).charge_no == 1


def test_the_same_key_with_another_request_is_refused(service_db: ServiceDB) -> None:
    keys = idempotency.IdempotencyKeys()
    conn = setup(service_db, keys)
    charge(service_db, conn, keys, "k", 300)
    with pytest.raises(idempotency.KeyReused, match="different request") as info:
        charge(service_db, conn, keys, "k", 999)
    assert info.value.key == "k"
    assert balance(service_db, conn) == (700, 1)


async def test_keys_expire_after_their_ttl_and_are_purged(service_db: ServiceDB) -> None:
    clock = FakeClock()
    keys = idempotency.IdempotencyKeys(ttl=60.0, clock=clock)
    conn = setup(service_db, keys)
    charge(service_db, conn, keys, "old", 100)
    await clock.advance(30)
    charge(service_db, conn, keys, "new", 100)
    assert charge(service_db, conn, keys, "old", 100).charge_no == 1  # still remembered
    await clock.advance(31)  # "old" is 61 s old, "new" 31 s
    assert keys.purge(conn) == 1
    assert charge(service_db, conn, keys, "new", 100).charge_no == 2
    assert charge(service_db, conn, keys, "old", 100).charge_no == 3  # forgotten: runs again
    assert balance(service_db, conn) == (700, 3)


def _waiting_on_locks(db: ServiceDB) -> int:
    """PostgreSQL sessions of this schema blocked on a lock right now."""
    import psycopg

    from tests.conftest import POSTGRES_URL

    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        (count,) = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE %s",
            ("%sagaway_idempotency_keys%",),
        ).fetchone()  # type: ignore[misc]
    return int(count)


def test_concurrent_repeats_wait_and_get_the_first_result(service_db: ServiceDB) -> None:
    """N threads, N connections, one key: the effect happens once and all get one response.

    The first caller to claim the key holds its transaction open inside the operation until
    every other caller has arrived (and, on PostgreSQL, until they are all seen blocked on the
    key's lock in pg_stat_activity): the repeats really are concurrent, not sequential.
    """
    callers = 6
    keys = idempotency.IdempotencyKeys()
    setup(service_db, keys)
    arrived = threading.Semaphore(0)
    in_operation = threading.Event()
    runs: list[int] = []
    results: list[Charge | BaseException] = []
    lock = threading.Lock()

    def hold_until_everyone_waits() -> None:
        runs.append(1)
        in_operation.set()
        for _ in range(callers - 1):
            assert arrived.acquire(timeout=20), "the other callers never arrived"
        if service_db.dialect is localdb.Dialect.POSTGRES:
            deadline = time.monotonic() + 20
            while _waiting_on_locks(service_db) < callers - 1:
                assert time.monotonic() < deadline, "repeats are not blocked on the key"
                time.sleep(0.01)

    def caller(i: int) -> None:
        try:
            conn = service_db.connect()  # SQLite connections belong to their thread
            if i > 0:
                assert in_operation.wait(timeout=20)
                arrived.release()
            result = charge(
                service_db, conn, keys, "order-7/3", 250,
                on_apply=hold_until_everyone_waits if i == 0 else None,
            )  # fmt: skip
        except BaseException as exc:
            result = exc  # type: ignore[assignment]
        with lock:
            results.append(result)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert all(isinstance(r, Charge) for r in results), results
    assert len(runs) == 1
    assert set(results) == {Charge("acct-1", 250, 1)} and len(results) == callers
    assert balance(service_db, service_db.connect()) == (750, 1)


def test_a_repeat_after_the_first_rolled_back_runs_the_operation(service_db: ServiceDB) -> None:
    """A concurrent repeat that waited for a first call which then rolled back does the work."""
    keys = idempotency.IdempotencyKeys()
    setup(service_db, keys)
    in_operation, second_started = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    class Declined(Exception):
        pass

    def first() -> None:
        def hold_then_fail() -> None:
            in_operation.set()
            assert second_started.wait(timeout=20)
            if service_db.dialect is localdb.Dialect.POSTGRES:
                deadline = time.monotonic() + 20
                while _waiting_on_locks(service_db) < 1:
                    assert time.monotonic() < deadline
                    time.sleep(0.01)
            raise Declined

        try:
            charge(service_db, service_db.connect(), keys, "k", 400, on_apply=hold_then_fail)
        except Declined:
            outcome["first"] = "declined"

    def second() -> None:
        assert in_operation.wait(timeout=20)
        second_started.set()
        outcome["second"] = charge(service_db, service_db.connect(), keys, "k", 400)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert outcome == {"first": "declined", "second": Charge("acct-1", 400, 1)}
    assert balance(service_db, service_db.connect()) == (600, 1)


def test_autocommit_connections_need_an_explicit_transaction(tmp_path: Any) -> None:
    import sqlite3

    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    keys = idempotency.IdempotencyKeys()
    keys.install(conn)
    # run() opens its own transaction when none is open: still once per key
    assert keys.run(conn, "k", lambda: {"n": 1}) == {"n": 1}
    assert keys.run(conn, "k", lambda: {"n": 2}) == {"n": 1}
    with pytest.raises(TypeError, match=r"sqlite3\.Connection or a psycopg"):
        keys.run(object(), "k", lambda: 1)  # type: ignore[arg-type]
