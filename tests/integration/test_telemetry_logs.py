"""Structured logs: records made in workflow and activity code carry the workflow key, run id
and step, whoever logged them; the JSON formatter writes them as fields."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

import sagaway as sw
from sagaway.telemetry import ContextFilter, JsonFormatter, configure_logging


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter())
    app = logging.getLogger("shop")
    app.addHandler(handler)
    app.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        app.removeHandler(handler)


async def test_records_made_in_workflows_and_activities_carry_their_context(
    db_url: str, captured: io.StringIO
) -> None:
    log = logging.getLogger("shop")
    manager = sw.Manager(db_url, poll_interval=0.05)

    @manager.register_activity(name="charge")
    async def charge(amount: int) -> str:
        log.info("charging %d", amount, extra={"currency": "EUR"})
        return "paid"

    @manager.register_workflow(name="checkout")
    async def checkout(amount: int) -> str:
        log.info("checkout begins")  # runs once here: nothing replays it
        return await charge(amount)

    log.info("outside any workflow")
    async with manager:
        handle = await manager.workflow(checkout, 5).execute(idempotency_key="cart-1")
        assert await handle.result(timeout=20) == "paid"
        run_id = (await handle.describe()).run_id

    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    outside, begins, charging = lines
    assert outside["message"] == "outside any workflow"
    assert "workflow_key" not in outside and "run_id" not in outside
    assert begins["message"] == "checkout begins"
    assert (begins["workflow_key"], begins["run_id"]) == ("cart-1", run_id)
    assert "step" not in begins
    assert charging["message"] == "charging 5"
    assert charging["workflow_key"] == "cart-1"
    assert charging["run_id"] == run_id
    assert charging["step"] == "1"
    assert charging["activity"] == "charge"
    assert charging["attempt"] == 1
    assert charging["currency"] == "EUR"  # ``extra`` fields are kept
    assert charging["level"] == "INFO" and charging["logger"] == "shop"
    assert charging["time"].endswith("+00:00")


def test_text_format_names_the_workflow_and_json_keeps_tracebacks() -> None:
    stream = io.StringIO()
    handler = configure_logging(logging.INFO, json_lines=False, stream=stream)
    try:
        logging.getLogger("shop").warning("plain")
        logging.getLogger("shop").warning("engine", extra={"workflow_id": "cart-9"})
    finally:
        logging.getLogger().removeHandler(handler)
    plain, engine = stream.getvalue().splitlines()
    assert plain.endswith("WARNING shop: plain")
    assert engine.endswith("WARNING shop: engine [workflow cart-9]")

    stream = io.StringIO()
    handler = configure_logging(logging.INFO, json_lines=True, stream=stream)
    try:
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("shop").exception("failed")
    finally:
        logging.getLogger().removeHandler(handler)
    record = json.loads(stream.getvalue())
    assert record["message"] == "failed"
    assert "ValueError: boom" in record["exception"]
