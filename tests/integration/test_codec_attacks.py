"""Attacks on sealed payloads (docs/security.md): a forged codec envelope sent from outside, a
compressed bomb, a ciphertext moved to another workflow's row, a sealed column replaced with
plaintext. Each is refused."""

from __future__ import annotations

import base64
import json
import zlib

import pytest

import sagaway as sw
from sagaway.codecs import Chain, Compress, Encrypt
from tests.integration import codecs_app
from tests.integration.codecs_app import MARK
from tests.integration.test_codecs import KEY_A, _reaches

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
