"""Attacks on sealed payloads (docs/security.md): a forged codec envelope sent from outside, a
compressed bomb, a ciphertext moved to another workflow's row, a sealed column replaced with
plaintext. Each is refused."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import sagaway as sw
from sagaway.cli.main import cli
from sagaway.codecs import Chain, Compress, Encrypt, key_id
from tests.integration import codecs_app
from tests.integration.codecs_app import MARK, V1_ARGS, V1_KEY, V1_QUOTE
from tests.integration.test_codecs import KEY_A, _reaches
from tests.store_helpers import raw_sql

# ----------------------------------------------------------------- forged envelopes (finding 3)


def _bomb(size: int) -> dict[str, str]:
    """A compressed envelope that expands to ``size`` bytes (a JSON string of spaces)."""
    data = b'"' + b" " * (size - 2) + b'"'
    return {"$sagaway_codec": "zlib", "data": base64.b64encode(zlib.compress(data, 9)).decode()}


FORGED = {"$sagaway_codec": "aesgcm:000000000000", "data": "AAAA"}


@pytest.mark.parametrize("payload", [FORGED, _bomb(50 * 1024 * 1024), {"a": 1, **FORGED}])
async def test_a_signal_holding_the_envelope_key_is_refused_at_send(
    db_url: str, payload: dict[str, str]
) -> None:
    m = codecs_app.build(db_url, Compress())
    async with m:
        await m.workflow("kyc.wait", MARK).execute(idempotency_key="forged")
        await _reaches(m, "forged", sw.WorkflowStatus.WAITING)
        with pytest.raises(sw.PayloadError, match=r"reserves for its codec envelopes"):
            await m.signal("approve").send("forged", payload)
        # Nothing was stored: the workflow still waits, and a real signal ends it.
        assert (await m.get_workflow("forged").describe()).signals == []
        await m.signal("approve").send("forged", '{"$sagaway_codec":"zlib"}')  # a string: fine
        got = await m.get_workflow("forged").result(timeout=30)
        assert got == f'{MARK} approved: {{"$sagaway_codec":"zlib"}}'


async def test_the_envelope_key_is_refused_at_top_level_only(db_url: str) -> None:
    m = sw.Manager(db_url)

    @m.register_workflow(name="takes.kwargs")
    async def takes(**fields: str) -> str:
        return "ran"

    @m.register_workflow(name="gives.envelope")
    async def gives() -> dict[str, str]:
        return FORGED

    async with m:
        # Nested under a parameter's name: not at top level, an ordinary value.
        handle = await m.workflow(takes, **FORGED).execute(idempotency_key="nested")
        assert await handle.result(timeout=30) == "ran"
        # A result holding the key at top level would be read back as an envelope: refused.
        await m.workflow(gives).execute(idempotency_key="gives")
        await _reaches(m, "gives", sw.WorkflowStatus.SUSPENDED)
        d = await m.get_workflow("gives").describe()
        assert d.error is not None and "reserves for its codec envelopes" in d.error["message"]


def test_decompression_stops_at_the_payload_limit() -> None:
    bomb = json.dumps(_bomb(200 * 1024 * 1024))
    with pytest.raises(sw.PayloadError, match=r"beyond the payload limit of 2097152 bytes"):
        Chain(Compress()).open(bomb)
    with pytest.raises(sw.PayloadError, match=r"limit of 1000 bytes"):
        Chain(Compress(), limit=1000).open(json.dumps(_bomb(1001)))
    assert Chain(Compress(), limit=1000).open(json.dumps(_bomb(1000))) == '"' + " " * 998 + '"'
    # Without a chain (a Compress used alone), the default limit holds too.
    with pytest.raises(sw.PayloadError, match="payload limit"):
        Compress().decode("zlib", base64.b64decode(_bomb(3 * 1024 * 1024)["data"]))
    # Damaged or truncated data is named as such.
    packed = zlib.compress(b'"' + b"x" * 5000 + b'"')
    with pytest.raises(sw.PayloadError, match="truncated"):
        Compress().decode("zlib", packed[:-10])
    with pytest.raises(sw.PayloadError, match="damaged"):
        Compress().decode("zlib", b"not zlib")


def test_the_payload_limit_of_the_manager_bounds_its_chain(sqlite_url: str) -> None:
    m = sw.Manager(sqlite_url, codec=[Compress(), Encrypt(keys=[KEY_A])], payload_limit=4096)
    assert m.codec is not None and m.codec.limit == 4096


# ----------------------------------------------------------------- unsealed payloads (finding 2)


def _set(db_url: str, table: str, column: str, value: str, where: str) -> None:
    quoted = value.replace("'", "''")
    raw_sql(db_url, f"UPDATE {table} SET {column} = '{quoted}' WHERE {where}")


def _compressed_only(text: str) -> str:
    """``text`` sealed by Compress alone: an envelope, but not encrypted."""
    data = base64.b64encode(zlib.compress(text.encode())).decode()
    return json.dumps({"$sagaway_codec": "zlib", "data": data}, separators=(",", ":"))


@pytest.mark.parametrize("forge", [lambda t: t, _compressed_only], ids=["plain", "zlib"])
async def test_arguments_replaced_by_unencrypted_json_are_refused(db_url: str, forge: Any) -> None:
    m = codecs_app.build(db_url, [Compress(), Encrypt(keys=[KEY_A])])
    async with m:
        await m.workflow("kyc.wait", MARK).execute(idempotency_key="swap")
        await _reaches(m, "swap", sw.WorkflowStatus.WAITING)
    # Behind Sagaway's back: the sealed arguments become values of the attacker's choice.
    _set(db_url, "workflows", "args", forge('{"person":"EVIL"}'), "key = 'swap'")
    m = codecs_app.build(db_url, [Compress(), Encrypt(keys=[KEY_A])])
    async with m:
        await m.signal("approve").send("swap", "yes")
        await _reaches(m, "swap", sw.WorkflowStatus.SUSPENDED)
        d = await m.get_workflow("swap").describe()
        assert d.error is not None
        assert "where Sagaway stores it sealed" in d.error["message"]
        assert "allow_unsealed=True" in d.error["message"]
    # The migration setting reads it (a database written before Encrypt was configured).
    m = codecs_app.build(db_url, [Compress(), Encrypt(keys=[KEY_A], allow_unsealed=True)])
    async with m:
        await m.retry("swap")
        assert await m.get_workflow("swap").result(timeout=30) == "EVIL approved: yes"


async def test_a_signal_replaced_by_plain_json_is_not_delivered(db_url: str) -> None:
    m = codecs_app.build(db_url, Encrypt(keys=[KEY_A]))
    async with m:
        await m.workflow("kyc.wait", MARK).execute(idempotency_key="sig")
        await _reaches(m, "sig", sw.WorkflowStatus.WAITING)
    # A signal stored in plain JSON by a client without the codec (as a row written with SQL
    # by anyone with access to the database would be): no worker runs meanwhile.
    async with sw.Manager(db_url).connect() as plain:
        await plain.signal("approve").send("sig", "forged approval")
    assert raw_sql(db_url, "SELECT payload FROM signals") == [('"forged approval"',)]
    m = codecs_app.build(db_url, Encrypt(keys=[KEY_A]))
    async with m:
        await _reaches(m, "sig", sw.WorkflowStatus.SUSPENDED)
        d = await m.get_workflow("sig").describe()
        assert d.error is not None and "plain JSON" in d.error["message"]
        assert d.status is sw.WorkflowStatus.SUSPENDED


def test_plain_text_refused_and_written_back_is_stored_as_it_was() -> None:
    chain = Chain([Compress(), Encrypt(keys=[KEY_A])])
    handed_on = chain.try_open('{"person":"EVIL"}', sealed=True)
    assert handed_on is not None and handed_on.startswith('{"$sagaway_codec":')
    with pytest.raises(sw.PayloadError, match="plain JSON where Sagaway stores it sealed"):
        sw.serialization.load_json(handed_on, "arguments")
    assert chain.seal(handed_on) == '{"person":"EVIL"}'
    # Fields Sagaway may write in clear (error records, a child start's key) still read.
    assert chain.try_open('{"kind":"x"}') == '{"kind":"x"}'
    # A compressed bomb in a field that must be encrypted is refused before it is inflated.
    with pytest.raises(sw.PayloadError, match="sealed only by"):
        chain.open(json.dumps(_bomb(200 * 1024 * 1024)), sealed=True)


async def test_the_cli_refuses_a_forged_envelope_signal(db_url: str) -> None:
    m = codecs_app.build(db_url, None)
    async with m:
        await m.workflow("kyc.wait", MARK).execute(idempotency_key="cli")
        await _reaches(m, "cli", sw.WorkflowStatus.WAITING)
        sent = await asyncio.to_thread(
            CliRunner().invoke,
            cli,
            ["signal", "--db", db_url, "cli", "approve", json.dumps(FORGED)],
        )
        assert sent.exit_code != 0
        assert "reserves for its codec envelopes" in sent.output
        assert raw_sql(db_url, "SELECT payload FROM signals") == []
        assert await m.get_workflow("cli").status() is sw.WorkflowStatus.WAITING


# ----------------------------------------------------------------- misplaced payloads (finding 2)
# Each encrypted payload is bound to its place (run, field, step, signal): a ciphertext copied
# by SQL from another workflow's row, another step or another signal does not open, and the
# workflow holding it is SUSPENDED with an error naming where it came from and where it was
# found. ``bank.pay`` (codecs_app) transfers the amount of its arguments after an approval.


def _bank_codec(**options: bool | None) -> list[Any]:
    return [Compress(), Encrypt(keys=[V1_KEY], **options)]  # type: ignore[arg-type]


def _run_id(db_url: str, key: str) -> str:
    return str(raw_sql(db_url, f"SELECT run_id FROM workflows WHERE key = '{key}'")[0][0])


def _copy(db_url: str, table: str, column: str, source: str, target: str) -> None:
    """Behind Sagaway's back: the ``column`` of the row ``source`` into the row ``target``."""
    copied = f"(SELECT {column} FROM {table} WHERE {source})"
    raw_sql(db_url, f"UPDATE {table} SET {column} = {copied} WHERE {target}")


async def _two_waiting(db_url: str) -> tuple[str, str]:
    """``pay-a`` (ALICE, 100) and ``pay-b`` (BOB, 5), each WAITING for its approval; no
    worker runs when this returns. Their run ids."""
    codecs_app.TRANSFERS.clear()
    m = codecs_app.bank(db_url, _bank_codec())
    async with m:
        await m.workflow("bank.pay", "ALICE", 100).execute(idempotency_key="pay-a")
        await m.workflow("bank.pay", "BOB", 5).execute(idempotency_key="pay-b")
        await _reaches(m, "pay-a", sw.WorkflowStatus.WAITING)
        await _reaches(m, "pay-b", sw.WorkflowStatus.WAITING)
    return _run_id(db_url, "pay-a"), _run_id(db_url, "pay-b")


async def _suspended_with(m: sw.Manager, key: str) -> str:
    """The error ``key`` is SUSPENDED with (it must not run to its end meanwhile)."""
    deadline = time.monotonic() + 30
    while (status := await m.get_workflow(key).status()) is not sw.WorkflowStatus.SUSPENDED:
        assert not status.ended, (
            f"{key} ran to its end ({status.value}) instead of being refused; transfers made: "
            f"{codecs_app.TRANSFERS}"
        )
        assert time.monotonic() < deadline, f"{key} never reached SUSPENDED"
        await asyncio.sleep(0.02)
    described = await m.get_workflow(key).describe()
    assert described.error is not None
    return str(described.error["message"])


ALICE_PAID = "sent 100 to ALICE (quoted ALICE, fee 13): ok"


async def test_arguments_copied_from_another_workflow_are_refused(db_url: str) -> None:
    run_a, run_b = await _two_waiting(db_url)
    _copy(db_url, "workflows", "args", f"run_id = '{run_a}'", f"run_id = '{run_b}'")
    m = codecs_app.bank(db_url, _bank_codec())
    async with m:
        await m.signal("approve").send("pay-b", "ok")
        message = await _suspended_with(m, "pay-b")
        assert (
            f"sealed for the arguments of run {run_a!r} was found in the arguments of run "
            f"{run_b!r}: it was copied there behind Sagaway's back"
        ) in message
        assert codecs_app.TRANSFERS == []  # A's transfer did not run under B
        await m.signal("approve").send("pay-a", "ok")
        assert await m.get_workflow("pay-a").result(timeout=30) == ALICE_PAID
    assert codecs_app.TRANSFERS == [("ALICE", 100)]


@pytest.mark.parametrize("origin", ["another step", "another run"])
async def test_a_step_result_copied_from_elsewhere_is_refused(db_url: str, origin: str) -> None:
    run_a, run_b = await _two_waiting(db_url)
    source, target = (
        ((run_b, "1"), (run_b, "2")) if origin == "another step" else ((run_a, "1"), (run_b, "1"))
    )
    row = "run_id = '{}' AND call_id = '{}'"
    _copy(db_url, "steps", "result", row.format(*source), row.format(*target))
    m = codecs_app.bank(db_url, _bank_codec())
    async with m:
        await m.signal("approve").send("pay-b", "ok")
        message = await _suspended_with(m, "pay-b")
        assert (
            f"sealed for the result of step {source[1]} of run {source[0]!r} was found in the "
            f"result of step {target[1]} of run {target[0]!r}"
        ) in message
    assert codecs_app.TRANSFERS == []


async def test_a_signal_copied_from_another_workflow_is_refused(db_url: str) -> None:
    run_a, run_b = await _two_waiting(db_url)
    async with codecs_app.bank(db_url, _bank_codec()).connect() as client:
        await client.signal("approve").send("pay-a", "ok")
        await client.signal("approve").send("pay-b", "declined")
    # B's refusal replaced by A's approval.
    _copy(db_url, "signals", "payload", f"run_id = '{run_a}'", f"run_id = '{run_b}'")
    m = codecs_app.bank(db_url, _bank_codec())
    async with m:
        assert await m.get_workflow("pay-a").result(timeout=30) == ALICE_PAID
        message = await _suspended_with(m, "pay-b")
        assert (
            f"sealed for signal 'approve' of run {run_a!r} was found in signal 'approve' of run "
            f"{run_b!r}"
        ) in message
        # Neither delivered nor rejected: it stays as it was.
        (signal,) = (await m.get_workflow("pay-b").describe()).signals
        assert signal.state == "pending"
    assert codecs_app.TRANSFERS == [("ALICE", 100)]


async def test_a_received_approval_copied_into_another_run_is_refused(db_url: str) -> None:
    run_a, run_b = await _two_waiting(db_url)
    m = codecs_app.bank(db_url, _bank_codec())
    async with m:
        await m.signal("approve").send("pay-a", "ok")
        assert await m.get_workflow("pay-a").result(timeout=30) == ALICE_PAID
    # A's received approval (step 3, a signal step) forged into B's wait for its own.
    step_3 = "run_id = '{}' AND call_id = '3'"
    _copy(db_url, "steps", "result", step_3.format(run_a), step_3.format(run_b))
    raw_sql(db_url, f"UPDATE steps SET status = 'COMPLETED' WHERE {step_3.format(run_b)}")
    m = codecs_app.bank(db_url, _bank_codec())
    async with m:
        await m.signal("approve").send("pay-b", "wake up")
        message = await _suspended_with(m, "pay-b")
        assert (
            f"sealed for signal 'approve' of run {run_a!r} was found in signal 'approve' of run "
            f"{run_b!r}"
        ) in message
    assert codecs_app.TRANSFERS == [("ALICE", 100)]


async def test_a_fork_seals_its_copies_again_for_its_own_run(db_url: str) -> None:
    codecs_app.TRANSFERS.clear()
    m = codecs_app.bank(db_url, _bank_codec())
    async with m:
        await m.workflow("bank.pay", "ALICE", 100).execute(idempotency_key="pay-a")
        await _reaches(m, "pay-a", sw.WorkflowStatus.WAITING)
        await m.signal("approve").send("pay-a", "ok")
        assert await m.get_workflow("pay-a").result(timeout=30) == ALICE_PAID
        # From step 3: keeps both quotes, waits for a new approval, transfers again.
        again = await m.fork("pay-a", from_step=3, new_key="pay-a-3")
        await _reaches(m, "pay-a-3", sw.WorkflowStatus.WAITING)
        await m.signal("approve").send("pay-a-3", "ok")
        assert await again.result(timeout=30) == ALICE_PAID
        # From step 4: keeps the received approval too (a signal step).
        assert await (await m.fork("pay-a", from_step=4, new_key="pay-a-4")).result(30) == (
            ALICE_PAID
        )
    assert codecs_app.TRANSFERS == [("ALICE", 100)] * 3
    for key in ("pay-a-3", "pay-a-4"):
        run = _run_id(db_url, key)
        (args,) = raw_sql(db_url, f"SELECT args FROM workflows WHERE run_id = '{run}'")[0]
        assert json.loads(args)["at"] == ["run", run, "args"]
        steps = raw_sql(db_url, f"SELECT call_id, result FROM steps WHERE run_id = '{run}'")
        places = {call_id: json.loads(result)["at"] for call_id, result in steps}
        assert places["1"] == ["run", run, "step", "1", "result"]
        assert places["2"] == ["run", run, "step", "2", "result"]
        assert places["3"] == ["run", run, "signal", "approve"]
        assert places["4"] == ["run", run, "step", "4", "result"]


async def test_a_fork_needs_the_keys_and_never_launders_a_misplaced_copy(
    db_url: str, tmp_path: Path
) -> None:
    codecs_app.TRANSFERS.clear()
    m = codecs_app.bank(db_url, _bank_codec())
    async with m:
        for key, payee in (("pay-a", "ALICE"), ("pay-b", "BOB")):
            await m.workflow("bank.pay", payee, 100).execute(idempotency_key=key)
            await _reaches(m, key, sw.WorkflowStatus.WAITING)
            await m.signal("approve").send(key, "ok")
            await m.get_workflow(key).result(timeout=30)
    # Without the codec, the copies could not be sealed for the new run: refused, nothing made.
    async with sw.Manager(db_url).connect() as plain:
        with pytest.raises(sw.PayloadKeyError) as refused:
            await plain.fork("pay-a", from_step=4, new_key="no-keys")
        with pytest.raises(sw.WorkflowNotFound):
            await plain.get_workflow("no-keys").status()
    assert str(refused.value).startswith(
        "cannot fork workflow 'pay-a': its arguments is encrypted and bound to its run, and a "
        "fork seals it again for the new run, which needs the codec and its keys"
    )
    assert "--codec-key-file" in str(refused.value)
    assert refused.value.key_id == key_id(V1_KEY)
    # `sagaway fork` with the keys seals them again; a worker runs the fork.
    keys = tmp_path / "keys"
    keys.write_text(base64.b64encode(V1_KEY).decode() + "\n")
    keys.chmod(0o600)
    cli_fork = ["fork", "--db", db_url, "pay-a", "--from-step", "4", "--new-key", "by-cli"]
    refused_cli = await asyncio.to_thread(CliRunner().invoke, cli, cli_fork)
    assert refused_cli.exit_code == 2 and "--codec-key-file" in refused_cli.output
    m = codecs_app.bank(db_url, _bank_codec())
    async with m:
        forked = await asyncio.to_thread(
            CliRunner().invoke, cli, [*cli_fork, "--codec-key-file", str(keys)]
        )
        assert forked.exit_code == 0, forked.output
        assert await m.get_workflow("by-cli").result(timeout=30) == ALICE_PAID
    # B's arguments copied into the ended A: a fork of A refuses them (it does not seal them
    # again as A's), instead of making a fork that pays B's payee as if A had asked.
    run_a, run_b = _run_id(db_url, "pay-a"), _run_id(db_url, "pay-b")
    _copy(db_url, "workflows", "args", f"run_id = '{run_b}'", f"run_id = '{run_a}'")
    async with codecs_app.bank(db_url, _bank_codec()).connect() as client:
        with pytest.raises(sw.PayloadError) as laundered:
            await client.fork("pay-a", from_step=4, new_key="laundered")
        with pytest.raises(sw.WorkflowNotFound):
            await client.get_workflow("laundered").status()
    assert str(laundered.value).startswith(
        "cannot fork workflow 'pay-a': its arguments cannot be opened here, and a fork seals it "
        f"again for its new run: a stored payload sealed for the arguments of run {run_b!r} was "
        f"found in the arguments of run {run_a!r}"
    )
    assert codecs_app.TRANSFERS == [("ALICE", 100), ("BOB", 100), ("ALICE", 100)]


async def test_rows_sealed_before_places_were_bound_run_until_refused(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    _, run_b = await _two_waiting(db_url)
    # What a database written before this version holds: envelopes v1 (bound to nothing).
    _set(db_url, "workflows", "args", V1_ARGS, f"run_id = '{run_b}'")
    _set(db_url, "steps", "result", V1_QUOTE, f"run_id = '{run_b}' AND call_id = '1'")
    # Refused once the operator says none should remain.
    m = codecs_app.bank(db_url, _bank_codec(allow_unbound=False))
    async with m:
        await m.signal("approve").send("pay-b", "ok")
        message = await _suspended_with(m, "pay-b")
        assert (
            f"a stored payload in the arguments of run {run_b!r} is encrypted without its place "
            "(envelope v1,"
        ) in message
        assert "allow_unbound=True" in message
    assert codecs_app.TRANSFERS == []
    # By default they are read (an upgrade keeps existing databases working), with a warning.
    caplog.set_level(logging.WARNING, logger="sagaway.codecs")
    m = codecs_app.bank(db_url, _bank_codec())
    async with m:
        await m.retry("pay-b")
        assert await m.get_workflow("pay-b").result(timeout=30) == (
            "sent 5 to BOB (quoted BOB, fee 11): ok"
        )
    assert codecs_app.TRANSFERS == [("BOB", 5)]
    warned = [r.getMessage() for r in caplog.records if r.name == "sagaway.codecs"]
    assert len(warned) == 1 and "allow_unbound=False" in warned[0]


@pytest.mark.direct_db
async def test_a_process_killed_inside_a_fork_leaves_no_fork(db_url: str) -> None:
    """The re-sealed payloads are written in the fork's own transaction: a process killed
    after part of them were written leaves no fork at all (never one holding its source's
    ciphertexts, which would not open), and forking again works. (Through the Engine Server
    the same store code runs the transaction in the server: deselected there.)"""
    codecs_app.TRANSFERS.clear()
    m = codecs_app.bank(db_url, _bank_codec())
    async with m:
        await m.workflow("bank.pay", "ALICE", 100).execute(idempotency_key="pay-a")
        await _reaches(m, "pay-a", sw.WorkflowStatus.WAITING)
        await m.signal("approve").send("pay-a", "ok")
        assert await m.get_workflow("pay-a").result(timeout=30) == ALICE_PAID
    run_a = _run_id(db_url, "pay-a")
    child = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "tests.integration.fork_crash_app", db_url, "pay-a", "pay-a-fix"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr
    assert child.stdout == "forking\n"
    assert raw_sql(db_url, "SELECT key FROM workflows") == [("pay-a",)]
    assert raw_sql(db_url, f"SELECT COUNT(*) FROM steps WHERE run_id <> '{run_a}'") == [(0,)]
    m = codecs_app.bank(db_url, _bank_codec())
    async with m:
        fork = await m.fork("pay-a", from_step=4, new_key="pay-a-fix")
        assert await fork.result(timeout=30) == ALICE_PAID
    assert codecs_app.TRANSFERS == [("ALICE", 100)] * 2


async def test_schedule_arguments_copied_from_another_schedule_are_refused(db_url: str) -> None:
    paid: list[str] = []
    m = sw.Manager(db_url, codec=_bank_codec(), poll_interval=0.05, recovery_interval=0.2)

    @m.register_workflow(name="payroll")
    async def payroll(iban: str) -> str:
        paid.append(iban)
        return iban

    async with m:
        for name, iban in (("payroll-a", "FR76-A"), ("payroll-b", "FR76-B")):
            await m.schedule(name, payroll, "0 0 1 1 *", args=(iban,))
    _copy(db_url, "schedules", "args", "id = 'payroll-a'", "id = 'payroll-b'")
    m = sw.Manager(db_url, codec=_bank_codec(), poll_interval=0.05, recovery_interval=0.2)
    m.register_workflow(payroll, name="payroll")
    async with m:
        # Sealed for the schedule, its arguments would never open in an execution: none starts.
        with pytest.raises(sw.PayloadKeyError) as refused:
            await m.trigger_schedule("payroll-b")
        assert str(refused.value).startswith(
            "stored arguments of schedule 'payroll-b' could not be opened: a stored payload "
            "sealed for the arguments of schedule 'payroll-a' was found in the arguments of "
            "schedule 'payroll-b'"
        )
        assert await (await m.trigger_schedule("payroll-a")).result(timeout=30) == "FR76-A"
        assert [r.key.split(":")[1] for r in await m.list_workflows()] == ["payroll-a"]
    assert paid == ["FR76-A"]
