"""The four services of the order lab, each with its own SQLite database.

Each command is one local transaction on the service's own database, and returns a reply
``{"ok": bool, "reason": str | None}``. None of them touches another service's database. The
knobs of the experiments are here: whether the inventory marks reservations PENDING (semantic
lock), how it releases stock (write the old value back, add the quantity back, or add it back
only if the reservation is still held), and how many times the carrier times out.
"""

from __future__ import annotations

import contextlib
import enum
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from sagaway import idempotency, localdb
from sagaway.lab.clock import SimClock

Reply = dict[str, Any]


class Log:
    """The lab's log: one line per event, stamped with the virtual time ``t``."""

    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        self.lines: list[str] = []

    def write(self, who: str, what: str, saga: str = "", detail: str = "") -> None:
        t = round(self.clock.elapsed)
        self.lines.append(f"t={t:2d}  {who:<12} {what:<18} {saga:<7} {detail}".rstrip())


class ReleaseMode(enum.Enum):
    """How ``ReleaseStock`` gives reserved stock back."""

    WRITE_BACK = "write_back"
    """Write back the ``available`` value seen before the reservation (lost update)."""
    DELTA = "delta"
    """Add the reserved quantity back (commutative), even if it was already given back."""
    CHECKED = "checked"
    """Add it back only if the reservation is still held (commutative and idempotent)."""


def _ok(**extra: Any) -> Reply:
    return {"ok": True, "reason": None, **extra}


def _refused(reason: str) -> Reply:
    return {"ok": False, "reason": reason}


class Service:
    """A service with its own database; each command it accepts is a method of the same name.

    Command methods have CamelCase names (``ReserveStock``): a name is the ``type`` of the
    messages the method handles, and the capital sets commands apart from the other methods.
    """

    name: ClassVar[str] = "service"
    cost: ClassVar[float] = 1.0
    """Virtual time the service takes to process a command."""
    schema: ClassVar[tuple[str, ...]] = ()

    def __init__(self, path: Path, log: Log) -> None:
        self.path = path
        self.log = log
        self.db = localdb.connect_sqlite(str(path))
        with localdb.transaction(self.db):
            for statement in self.schema:
                self.db.execute(statement)

    def handle(self, command: str, body: dict[str, Any]) -> Reply:
        """Run ``command`` in one local transaction; its reply."""
        handler: Callable[[dict[str, Any]], Reply] | None = getattr(self, command, None)
        if handler is None or not command[:1].isupper():
            return _refused(f"unknown command {command}")
        with localdb.transaction(self.db):
            return handler(body)

    def say(self, command: str, body: dict[str, Any], detail: str = "") -> None:
        self.log.write(self.name, command, body["saga"], detail)

    def close(self) -> None:
        self.db.close()


class OrderService(Service):
    """Orders: created PENDING, then CONFIRMED, or CANCELLED by compensation (never deleted)."""

    name = "order"
    schema = (
        "CREATE TABLE IF NOT EXISTS orders (saga TEXT PRIMARY KEY, customer TEXT NOT NULL,"
        " item TEXT NOT NULL, qty INTEGER NOT NULL, status TEXT NOT NULL)",
    )

    def CreateOrder(self, m: dict[str, Any]) -> Reply:
        self.db.execute(
            "INSERT INTO orders (saga, customer, item, qty, status) VALUES (?, ?, ?, ?, 'PENDING')"
            " ON CONFLICT (saga) DO NOTHING",
            (m["saga"], m["customer"], m["item"], m["qty"]),
        )
        self.say("CreateOrder", m)
        return _ok()

    def CancelOrder(self, m: dict[str, Any]) -> Reply:
        # Replaces the status: the same result however many times it arrives.
        cur = self.db.execute("UPDATE orders SET status = 'CANCELLED' WHERE saga = ?", (m["saga"],))
        self.say("CancelOrder", m, "" if cur.rowcount else "-> no order: nothing to cancel")
        return _ok()

    def ConfirmOrder(self, m: dict[str, Any]) -> Reply:
        self.db.execute(
            "UPDATE orders SET status = 'CONFIRMED' WHERE saga = ? AND status = 'PENDING'",
            (m["saga"],),
        )
        self.say("ConfirmOrder", m)
        return _ok()

    def statuses(self) -> dict[str, str]:
        rows = self.db.execute("SELECT saga, status FROM orders ORDER BY saga").fetchall()
        return {str(saga): str(status) for saga, status in rows}


class InventoryService(Service):
    """Stock and reservations; the semantic lock and the release modes live here."""

    name = "inventory"
    schema = (
        "CREATE TABLE IF NOT EXISTS stock (item TEXT PRIMARY KEY, available INTEGER NOT NULL)",
        "CREATE TABLE IF NOT EXISTS reservations (saga TEXT PRIMARY KEY, item TEXT NOT NULL,"
        " qty INTEGER NOT NULL, state TEXT NOT NULL, available_before INTEGER NOT NULL)",
    )

    def __init__(
        self,
        path: Path,
        log: Log,
        *,
        stock: int,
        semantic_lock: bool = False,
        release: ReleaseMode = ReleaseMode.CHECKED,
    ) -> None:
        super().__init__(path, log)
        self.semantic_lock = semantic_lock
        self.release = release
        with localdb.transaction(self.db):
            self.db.execute(
                "INSERT INTO stock (item, available) VALUES ('book', ?)"
                " ON CONFLICT (item) DO UPDATE SET available = excluded.available",
                (stock,),
            )

    def available(self) -> int:
        (value,) = self.db.execute("SELECT available FROM stock WHERE item = 'book'").fetchone()
        return int(value)

    def pending(self) -> int:
        (count,) = self.db.execute(
            "SELECT count(*) FROM reservations WHERE state = 'PENDING'"
        ).fetchone()
        return int(count)

    def page(self) -> str:
        """What the product page shows now."""
        available = self.available()
        if available > 0:
            return f"in stock ({available})"
        if self.semantic_lock and self.pending() > 0:
            return "on hold (a PENDING reservation may be released)"
        return "out of stock"

    def ReserveStock(self, m: dict[str, Any]) -> Reply:
        held = self.db.execute(
            "SELECT state FROM reservations WHERE saga = ?", (m["saga"],)
        ).fetchone()
        if held is not None and held[0] in ("PENDING", "RESERVED", "CONFIRMED"):
            self.say("ReserveStock", m, f"-> available={self.available()}  already reserved")
            return _ok()
        available = self.available()
        if available < m["qty"]:
            if self.semantic_lock and self.pending() > 0:
                self.say("ReserveStock", m, f"-> available={available}  busy")
                return _refused("busy")  # on hold: it may come free, try again later
            self.say("ReserveStock", m, f"-> available={available}  out_of_stock")
            return _refused("out_of_stock")
        state = "PENDING" if self.semantic_lock else "RESERVED"
        self.db.execute(
            "UPDATE stock SET available = available - ? WHERE item = 'book'", (m["qty"],)
        )
        self.db.execute(
            "INSERT INTO reservations (saga, item, qty, state, available_before)"
            " VALUES (?, 'book', ?, ?, ?) ON CONFLICT (saga) DO UPDATE SET qty = excluded.qty,"
            " state = excluded.state, available_before = excluded.available_before",
            (m["saga"], m["qty"], state, available),
        )
        self.say("ReserveStock", m, f"-> available={self.available()}")
        return _ok()

    def ReleaseStock(self, m: dict[str, Any]) -> Reply:
        saga = m["saga"]
        if self.release is ReleaseMode.CHECKED:
            # Only a reservation still held is given back: a second delivery, or the release
            # of a reservation that never happened, changes no row and touches no stock.
            cur = self.db.execute(
                "UPDATE reservations SET state = 'RELEASED'"
                " WHERE saga = ? AND state IN ('RESERVED', 'PENDING')",
                (saga,),
            )
            if cur.rowcount == 0:
                self.say("ReleaseStock", m, f"-> available={self.available()}  nothing to release")
                return _ok(note="nothing to release")
            (qty,) = self.db.execute(
                "SELECT qty FROM reservations WHERE saga = ?", (saga,)
            ).fetchone()
            self.db.execute(
                "UPDATE stock SET available = available + ? WHERE item = 'book'", (qty,)
            )
        else:
            row = self.db.execute(
                "SELECT qty, available_before FROM reservations WHERE saga = ?", (saga,)
            ).fetchone()
            if row is None:
                self.say("ReleaseStock", m, f"-> available={self.available()}  nothing reserved")
                return _ok(note="nothing reserved")
            qty, before = row
            if self.release is ReleaseMode.WRITE_BACK:
                self.db.execute("UPDATE stock SET available = ? WHERE item = 'book'", (before,))
            else:
                self.db.execute(
                    "UPDATE stock SET available = available + ? WHERE item = 'book'", (qty,)
                )
            self.db.execute("UPDATE reservations SET state = 'RELEASED' WHERE saga = ?", (saga,))
        self.say("ReleaseStock", m, f"-> available={self.available()}")
        return _ok()

    def ConfirmReservation(self, m: dict[str, Any]) -> Reply:
        # The saga went through: the PENDING mark (semantic lock) comes off.
        self.db.execute(
            "UPDATE reservations SET state = 'CONFIRMED'"
            " WHERE saga = ? AND state IN ('PENDING', 'RESERVED')",
            (m["saga"],),
        )
        self.say("ConfirmReservation", m)
        return _ok()


class PaymentService(Service):
    """Charges cards against a credit limit; a repeated charge returns the first answer."""

    name = "payment"
    cost = 5.0  # an external card API: slow
    schema = (
        "CREATE TABLE IF NOT EXISTS customers (name TEXT PRIMARY KEY, credit_limit INTEGER)",
        "CREATE TABLE IF NOT EXISTS charges (saga TEXT PRIMARY KEY, customer TEXT, amount INTEGER)",
    )

    def __init__(self, path: Path, log: Log, *, customers: dict[str, int]) -> None:
        super().__init__(path, log)
        self.keys = idempotency.IdempotencyKeys(clock=log.clock)
        self.keys.install(self.db)
        with localdb.transaction(self.db):
            self.db.executemany(
                "INSERT INTO customers (name, credit_limit) VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET credit_limit = excluded.credit_limit",
                list(customers.items()),
            )

    def ChargeCard(self, m: dict[str, Any]) -> Reply:
        def charge() -> Reply:
            (limit,) = self.db.execute(
                "SELECT credit_limit FROM customers WHERE name = ?", (m["customer"],)
            ).fetchone()
            if m["amount"] > limit:
                return _refused("card_declined")
            self.db.execute(
                "INSERT INTO charges (saga, customer, amount) VALUES (?, ?, ?)",
                (m["saga"], m["customer"], m["amount"]),
            )
            return _ok()

        # The card API is called once per saga: a resent ChargeCard gets the stored answer.
        reply = self.keys.run(self.db, f"charge:{m['saga']}", charge, response_type=Reply)
        outcome = "charged" if reply["ok"] else reply["reason"]
        self.say("ChargeCard", m, f"{m['amount']} yen -> {outcome}")
        return reply

    def charges(self) -> int:
        (count,) = self.db.execute("SELECT count(*) FROM charges").fetchone()
        return int(count)


class ShippingService(Service):
    """Arranges shipping through a carrier whose API can time out."""

    name = "shipping"
    schema = ("CREATE TABLE IF NOT EXISTS shipments (saga TEXT PRIMARY KEY, status TEXT NOT NULL)",)

    def __init__(self, path: Path, log: Log, *, timeouts: int = 0) -> None:
        super().__init__(path, log)
        self.timeouts_left = timeouts

    def ArrangeShipping(self, m: dict[str, Any]) -> Reply:
        if self.timeouts_left > 0:
            self.timeouts_left -= 1
            self.say("ArrangeShipping", m, "-> timeout")
            return _refused("timeout")
        self.db.execute(
            "INSERT INTO shipments (saga, status) VALUES (?, 'ARRANGED')"
            " ON CONFLICT (saga) DO NOTHING",
            (m["saga"],),
        )
        self.say("ArrangeShipping", m, "-> ok")
        return _ok()

    def shipments(self) -> int:
        (count,) = self.db.execute("SELECT count(*) FROM shipments").fetchone()
        return int(count)


def close_all(services: dict[str, Service]) -> None:
    for service in services.values():
        with contextlib.suppress(sqlite3.Error):
            service.close()
