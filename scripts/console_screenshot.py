"""Take the screenshot of the web console in docs/images/console-workflow.png.

Runs a saga that fails at its third step and compensates the first two, on a temporary SQLite
database; starts ``sagaway ui`` on it; and photographs that workflow's page with headless
Chromium (Debian's ``chromium`` and ``chromium-driver`` packages; nothing is downloaded).

    python scripts/console_screenshot.py [--out docs/images/console-workflow.png]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import sagaway as sw

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
KEY = "order-1042"


class CarrierRefused(sw.CompletableError):
    """No carrier takes the parcel: a business outcome, compensated."""


@dataclass
class Order:
    order_id: str
    sku: str
    quantity: int
    amount_cents: int


def build(manager: sw.Manager) -> None:
    @manager.register_activity(name="inventory.reserve")
    async def reserve_stock(order: Order) -> str:
        await asyncio.sleep(0.12)
        return f"rsv-{order.order_id}"

    @manager.register_activity(name="inventory.release")
    async def release_stock(reservation: str) -> None:
        await asyncio.sleep(0.06)

    @manager.register_activity(name="payment.charge")
    async def charge_card(order: Order) -> str:
        await asyncio.sleep(0.2)
        return f"ch-{order.order_id}"

    @manager.register_activity(name="payment.refund")
    async def refund_card(charge: str) -> None:
        await asyncio.sleep(0.1)

    @manager.register_activity(name="shipping.book")
    async def book_shipment(order: Order) -> str:
        await asyncio.sleep(0.15)
        raise CarrierRefused(f"no carrier accepts {order.quantity} x {order.sku}", code="E_CARRIER")

    @manager.register_workflow(name="checkout")
    async def checkout(order: Order) -> str:
        async with sw.Saga() as saga:
            reservation = await reserve_stock(order)
            saga.add_compensation(release_stock, reservation)
            charge = await charge_card(order)
            saga.add_compensation(refund_card, charge)
            return await book_shipment(order)


async def run_saga(url: str) -> None:
    manager = sw.Manager(url)
    build(manager)
    async with manager:
        order = Order("1042", "KB-ERGO-75", 3, 38700)
        handle = await manager.workflow("checkout", order).execute(idempotency_key=KEY)
        with contextlib.suppress(CarrierRefused):  # the outcome shown: FAILED, compensated
            await handle.result(timeout=30)


def screenshot(base: str, out: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900",
                "--hide-scrollbars", "--force-device-scale-factor=1"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        # The page's viewport itself 1280x900 (the window's size includes its frame).
        metrics = {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        driver.get(f"{base}/workflows/{urllib.parse.quote(KEY, safe='')}")
        driver.find_element("css selector", ".timeline")
        out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(out))
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs/images/console-workflow.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sagaway-shot-") as tmp:
        url = f"sqlite:///{tmp}/shop.db"
        asyncio.run(run_saga(url))
        ui = subprocess.Popen(
            [sys.executable, "-m", "sagaway", "ui", "--db", url, "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert ui.stdout is not None
            line = ui.stdout.readline()
            if not line.startswith("listening on "):
                sys.exit(f"sagaway ui did not start: {line!r}")
            screenshot(line.removeprefix("listening on ").strip(), args.out)
        finally:
            ui.terminate()
            ui.wait(30)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
