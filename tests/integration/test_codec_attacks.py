"""Attacks on sealed payloads (docs/security.md): a forged codec envelope sent from outside, a
compressed bomb, a ciphertext moved to another workflow's row, a sealed column replaced with
plaintext. Each is refused."""

from __future__ import annotations

import asyncio
import base64
import json
import zlib
from typing import Any

import pytest
from click.testing import CliRunner

import sagaway as sw
from sagaway.cli.main import cli
from sagaway.codecs import Chain, Compress, Encrypt
from tests.integration import codecs_app
from tests.integration.codecs_app import MARK
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
