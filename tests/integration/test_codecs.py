"""Payload codecs (``Manager(codec=...)``) on every backend: an encrypted workflow runs end to
end while the database holds no plaintext of its payloads; key rotation; a missing key
suspends the workflow with a clear error; compression and the claim check; the CLI and the
console with and without the keys."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import sagaway as sw
from sagaway.cli.main import cli
from sagaway.codecs import Compress, Encrypt, FileStore, Offload, key_id
from tests.integration import codecs_app
from tests.integration.codecs_app import MARK
from tests.store_helpers import raw_sql

KEY_A = Encrypt.generate_key()
KEY_B = Encrypt.generate_key()
TABLES = {
    "workflows": "args, args_hash, result, error",
    "steps": "result, error",
    "signals": "payload, rejected",
    "attempt_errors": "error",
}


async def _reaches(m: sw.Manager, key: str, status: sw.WorkflowStatus) -> None:
    deadline = time.monotonic() + 30
    while await m.get_workflow(key).status() is not status:
        assert time.monotonic() < deadline, f"{key} never reached {status}"
        await asyncio.sleep(0.02)


def _payload_columns(db_url: str) -> dict[str, list[str]]:
    """Every payload column of every row, read with SQL behind the engine's back."""
    return {
        table: [str(v) for row in raw_sql(db_url, f"SELECT {cols} FROM {table}") for v in row]
        for table, cols in TABLES.items()
    }


async def _run_parent(m: sw.Manager, key: str) -> str:
    handle = await m.workflow("kyc.parent", MARK).execute(idempotency_key=key)
    await _reaches(m, key, sw.WorkflowStatus.WAITING)
    await m.signal("approve").send(key, f"ok by {MARK}")
    return str(await handle.result(timeout=30))


def _expected() -> str:
    return f"{MARK}|child saw {MARK}|refused {MARK}|ok by {MARK}"


async def test_an_encrypted_workflow_runs_and_the_database_holds_no_plaintext(
    db_url: str,
) -> None:
    m = codecs_app.build(db_url, [Compress(), Encrypt(keys=[KEY_A])])
    async with m:
        assert await _run_parent(m, "kyc-1") == _expected()
        # An attach with the same input joins it (the keyed hash matches)...
        again = await m.workflow("kyc.parent", MARK).execute(idempotency_key="kyc-1")
        assert await again.result(timeout=5) == _expected()
        # ...and other input under the key is still refused.
        with pytest.raises(sw.IdempotencyConflict):
            await m.workflow("kyc.parent", "someone else").execute(idempotency_key="kyc-1")
        with pytest.raises(sw.CompletableError, match=f"refused {MARK}"):
            await m.workflow("kyc.refuse", MARK).execute_get(idempotency_key="kyc-2")
        d = await m.get_workflow("kyc-1").describe()
        assert d.input == {"person": MARK}
        assert any(s.attempt_errors for s in d.steps)
        assert MARK in json.dumps([s.attempt_errors for s in d.steps])
    columns = _payload_columns(db_url)
    assert columns["attempt_errors"], "the failed attempt was recorded"
    assert columns["signals"]
    for table, values in columns.items():
        for value in values:
            assert MARK not in value, f"plaintext in {table}: {value[:200]}"
    sealed = [v for values in columns.values() for v in values if v.startswith('{"$sagaway_codec"')]
    assert len(sealed) >= 10
    hashes = [v for v in columns["workflows"] if v.startswith("hmac:")]
    assert len(hashes) == 4  # parent, child, refusing child, refusing top-level
    # A child start's result is the child's key, in clear like the key (a purge reads it).
    starts = [v for (v,) in raw_sql(db_url, "SELECT result FROM steps WHERE kind = 'child'")]
    assert sorted(starts) == ['"kyc-1/2"', '"kyc-1/4"']
    assert all(h.startswith(f"hmac:{key_id(_raw(KEY_A))}:") for h in hashes)


def _raw(key: str) -> bytes:
    import base64

    return base64.b64decode(key)


def _key_ids(db_url: str, key: str) -> tuple[str, str]:
    """The key ids sealing the input and the result of the workflow under ``key``."""
    rows = raw_sql(db_url, f"SELECT args, result FROM workflows WHERE key = '{key}'")
    ids = [re.search(r'aesgcm:([0-9a-f]+)"', str(v)) for v in rows[0]]
    return tuple(i.group(1) if i else "" for i in ids)  # type: ignore[return-value]


async def test_rotation_reads_old_rows_writes_new_ones_and_a_missing_key_suspends(
    db_url: str,
) -> None:
    kid_a, kid_b = key_id(_raw(KEY_A)), key_id(_raw(KEY_B))
    old = codecs_app.build(db_url, Encrypt(keys=[KEY_A]))
    async with old:
        for key in ("rot-1", "rot-2"):
            await old.workflow("kyc.wait", MARK).execute(idempotency_key=key)
            await _reaches(old, key, sw.WorkflowStatus.WAITING)
    # The new key first, the old one kept: old rows read, new rows written with B.
    rotated = codecs_app.build(db_url, Encrypt(keys=[KEY_B, KEY_A]))
    async with rotated:
        await rotated.signal("approve").send("rot-1", "yes")
        assert await rotated.get_workflow("rot-1").result(timeout=30) == f"{MARK} approved: yes"
    assert _key_ids(db_url, "rot-1") == (kid_a, kid_b)
    # Only the new key: the old input cannot be read; the workflow is SUSPENDED with an error
    # naming the key id it needs, its rows untouched.
    only_new = codecs_app.build(db_url, Encrypt(keys=[KEY_B]))
    async with only_new:
        await only_new.signal("approve").send("rot-2", "late")
        await _reaches(only_new, "rot-2", sw.WorkflowStatus.SUSPENDED)
        d = await only_new.get_workflow("rot-2").describe()
        assert d.error is not None
        assert d.error["type"] == "sagaway.errors.PayloadKeyError"
        assert kid_a in d.error["message"]
        assert d.input == "«encrypted»"  # no key for it here: shown, not decoded
    assert _key_ids(db_url, "rot-2")[0] == kid_a
    # With the old key back, the same workflow goes on from where it was.
    healed = codecs_app.build(db_url, Encrypt(keys=[KEY_B, KEY_A]))
    async with healed:
        await healed.retry("rot-2")
        assert await healed.get_workflow("rot-2").result(timeout=30) == f"{MARK} approved: late"


async def test_compress_only_when_it_saves_space(sqlite_url: str) -> None:
    chain = sw.codecs.Chain([Compress()])
    big = json.dumps({"text": MARK * 200})
    sealed = chain.seal(big)
    assert sealed.startswith('{"$sagaway_codec":"zlib"') and len(sealed) < len(big) / 5
    assert chain.open(sealed) == big
    small = json.dumps({"text": "short"})
    assert chain.seal(small) == small  # not worth it: stays plain JSON
    m = codecs_app.build(sqlite_url, Compress())
    async with m:
        person = MARK * 100
        result = await m.workflow("kyc.child", person).execute_get(idempotency_key="z-1")
        assert result == f"child saw {person}"
    (args,) = raw_sql(sqlite_url, "SELECT args FROM workflows WHERE key = 'z-1'")[0]
    assert args.startswith('{"$sagaway_codec":"zlib"') and MARK not in args


async def test_a_large_payload_goes_to_the_file_store_and_back(
    sqlite_url: str, tmp_path: Path
) -> None:
    blobs = FileStore(tmp_path / "blobs")
    chain = [Encrypt(keys=[KEY_A]), Offload(blobs, threshold=4096)]
    m = codecs_app.build(sqlite_url, chain)
    person = MARK * 1000  # ~17 kB: over the threshold
    async with m:
        result = await m.workflow("kyc.child", person).execute_get(idempotency_key="big-1")
        assert result == f"child saw {person}"
        small = await m.workflow("kyc.child", "x").execute_get(idempotency_key="small-1")
        assert small == "child saw x"
    (args, res) = raw_sql(sqlite_url, "SELECT args, result FROM workflows WHERE key = 'big-1'")[0]
    for column in (args, res):
        assert json.loads(column)["$sagaway_codec"] == f"aesgcm:{key_id(_raw(KEY_A))},ref"
        assert len(column) < 250  # the reference, and the place it is sealed for
    files = list((tmp_path / "blobs").iterdir())
    assert len(files) == 2  # input and result; the small workflow stayed in its row
    assert all(MARK.encode() not in f.read_bytes() for f in files)  # encrypted before offload
    (small_args,) = raw_sql(sqlite_url, "SELECT args FROM workflows WHERE key = 'small-1'")[0]
    assert ",ref" not in small_args
    # A missing blob is a clear error where it is read, not a crash.
    for f in files:
        f.unlink()
    m2 = codecs_app.build(sqlite_url, chain)
    async with m2:
        with pytest.raises(sw.PayloadError):
            await m2.get_workflow("big-1").result(timeout=5)


def test_keys_are_32_bytes_or_base64_and_the_extra_is_named(monkeypatch: Any) -> None:
    assert Encrypt(keys=[_raw(KEY_A)]).current_key_id == Encrypt(keys=[KEY_A]).current_key_id
    with pytest.raises(ValueError, match="32 bytes"):
        Encrypt(keys=[b"short"])
    with pytest.raises(ValueError, match="base64"):
        Encrypt(keys=["not base64 !"])
    with pytest.raises(ValueError, match="at least one key"):
        Encrypt(keys=[])
    import sys

    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None)
    with pytest.raises(ImportError, match=r"'crypto' extra"):
        Encrypt(keys=[KEY_A])


def test_a_key_file_lists_keys_current_first(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"# current\n{KEY_B}\n\n{KEY_A}\n")
    assert sw.codecs.keys_from(path) == [KEY_B, KEY_A]
    path.write_text("nonsense\n")
    with pytest.raises(ValueError):
        sw.codecs.keys_from(path)


# ------------------------------------------------------------------ CLI and console


def _blind(output: str) -> bool:
    """Whether ``output`` shows a payload as encrypted (JSON escapes the marker)."""
    return "«encrypted»" in output or "\\u00abencrypted\\u00bb" in output


async def _sagaway(*args: str, env: dict[str, str] | None = None) -> Result:
    return await asyncio.to_thread(CliRunner(env=env).invoke, cli, list(args))


@pytest.fixture
async def sealed_db(db_url: str) -> str:
    m = codecs_app.build(db_url, [Compress(), Encrypt(keys=[KEY_A])])
    async with m:
        assert await _run_parent(m, "kyc-1") == _expected()
        with pytest.raises(sw.CompletableError):
            await m.workflow("kyc.refuse", MARK).execute_get(idempotency_key="kyc-2")
    return db_url


async def test_cli_show_and_list_decode_with_the_keys_only(sealed_db: str, tmp_path: Path) -> None:
    key_file = tmp_path / "keys"
    key_file.write_text(f"{KEY_B}\n{KEY_A}\n")
    no_env = {"SAGAWAY_CODEC_KEYS": ""}
    for key in ("kyc-1", "kyc-2"):
        blind = await _sagaway("show", "--db", sealed_db, key, env=no_env)
        assert blind.exit_code == 0, blind.output
        assert MARK not in blind.output and _blind(blind.output)
        seen = await _sagaway("show", "--db", sealed_db, "--codec-key-file", str(key_file), key)
        assert seen.exit_code == 0, seen.output
        assert MARK in seen.output and not _blind(seen.output)
    shown = await _sagaway("show", "--db", sealed_db, "--json", "kyc-1", env=no_env)
    assert shown.exit_code == 0 and json.loads(shown.output)["input"] == "«encrypted»"
    listed = await _sagaway("list", "--db", sealed_db, "--json", env=no_env)
    assert listed.exit_code == 0, listed.output
    assert MARK not in listed.output and _blind(listed.output)
    by_env = await _sagaway(
        "list", "--db", sealed_db, "--json", env={"SAGAWAY_CODEC_KEYS": f"{KEY_B},{KEY_A}"}
    )
    assert by_env.exit_code == 0, by_env.output
    assert MARK in by_env.output and not _blind(by_env.output)
    bad = tmp_path / "bad"
    bad.write_text("not a key\n")
    refused = await _sagaway("show", "--db", sealed_db, "--codec-key-file", str(bad), "kyc-1")
    assert refused.exit_code == 2 and "codec keys" in refused.output


async def test_console_workflow_page_decodes_with_the_keys_only(sealed_db: str) -> None:
    from starlette.testclient import TestClient

    from sagaway.console import ConsoleConfig, create_app

    def page(keys: tuple[str, ...]) -> str:
        with TestClient(
            create_app(ConsoleConfig(url=sealed_db, codec_keys=keys)),
            base_url="http://127.0.0.1:8080",
        ) as client:
            response = client.get("/workflows/kyc-1")
            assert response.status_code == 200
            return str(response.text)

    blind = await asyncio.to_thread(page, ())
    assert MARK not in blind and "«encrypted»" in blind
    seen = await asyncio.to_thread(page, (KEY_A,))
    assert MARK in seen and "«encrypted»" not in seen


async def _signal_state(m: sw.Manager, key: str, index: int, state: str) -> sw.SignalDescription:
    deadline = time.monotonic() + 30
    while True:
        signals = (await m.get_workflow(key).describe()).signals
        if len(signals) > index and signals[index].state == state:
            return signals[index]
        assert time.monotonic() < deadline, f"signal {index} of {key} never {state}: {signals}"
        await asyncio.sleep(0.02)


async def test_cli_signal_with_the_keys_stores_the_payload_encrypted(
    db_url: str, tmp_path: Path
) -> None:
    key_file = tmp_path / "keys"
    key_file.write_text(f"{KEY_A}\n")
    m = codecs_app.build(db_url, Encrypt(keys=[KEY_A]))
    async with m:
        await m.workflow("kyc.wait", "p").execute(idempotency_key="sig-1")
        await _reaches(m, "sig-1", sw.WorkflowStatus.WAITING)
        # Not a str: rejected, and the reason (which may quote the payload) is sealed too.
        await m.signal("approve").send("sig-1", {"who": MARK})
        rejected = await _signal_state(m, "sig-1", 0, "rejected")
        assert rejected.rejected and "str" in rejected.rejected
        sent = await _sagaway(
            "signal", "--db", db_url, "--codec-key-file", str(key_file),
            "sig-1", "approve", json.dumps(MARK),
        )  # fmt: skip
        assert sent.exit_code == 0, sent.output
        assert await m.get_workflow("sig-1").result(timeout=30) == f"p approved: {MARK}"
    rows = raw_sql(db_url, "SELECT payload, rejected FROM signals ORDER BY id")
    assert len(rows) == 2 and rows[0][1] is not None and rows[1][1] is None
    for value in (rows[0][0], rows[0][1], rows[1][0]):
        assert value.startswith('{"$sagaway_codec"') and MARK not in value


async def test_a_signal_sealed_with_an_unknown_key_waits_pending_until_the_key_is_given(
    db_url: str,
) -> None:
    kid_b = key_id(_raw(KEY_B))
    worker = codecs_app.build(db_url, Encrypt(keys=[KEY_A]))
    sender = codecs_app.build(db_url, Encrypt(keys=[KEY_B, KEY_A]))
    async with worker, sender.connect():
        await worker.workflow("kyc.wait", "p").execute(idempotency_key="sig-2")
        await _reaches(worker, "sig-2", sw.WorkflowStatus.WAITING)
        await sender.signal("approve").send("sig-2", "yes")
        await _reaches(worker, "sig-2", sw.WorkflowStatus.SUSPENDED)
        d = await worker.get_workflow("sig-2").describe()
        assert d.error is not None and kid_b in d.error["message"]
        assert [s.state for s in d.signals] == ["pending"]  # neither rejected nor delivered
    healed = codecs_app.build(db_url, Encrypt(keys=[KEY_A, KEY_B]))
    async with healed:
        await healed.retry("sig-2")
        assert await healed.get_workflow("sig-2").result(timeout=30) == "p approved: yes"


def test_every_payload_gets_a_fresh_nonce() -> None:
    chain = sw.codecs.Chain([Encrypt(keys=[KEY_A])])
    sealed = {chain.seal('"same"') for _ in range(1000)}
    assert len(sealed) == 1000  # nonces come from sagaway.randomness (tested there)


def test_a_sync_client_of_the_manager_stores_its_starts_encrypted(sqlite_url: str) -> None:
    m = codecs_app.build(sqlite_url, Encrypt(keys=[KEY_A]))
    with m.sync() as client:
        client.start("kyc.child", person=MARK, key="sync-1")
        assert client.get_workflow("sync-1").describe().input == {"person": MARK}
    (args,) = raw_sql(sqlite_url, "SELECT args FROM workflows WHERE key = 'sync-1'")[0]
    assert args.startswith('{"$sagaway_codec":"aesgcm:') and MARK not in args


def test_a_sync_client_by_url_takes_a_codec(sqlite_url: str) -> None:
    with sw.SyncClient(sqlite_url, codec=Encrypt(keys=[KEY_A])) as client:
        client.start("kyc.child", person=MARK, key="sync-2")
        assert client.get_workflow("sync-2").describe().input == {"person": MARK}
    (args,) = raw_sql(sqlite_url, "SELECT args FROM workflows WHERE key = 'sync-2'")[0]
    assert args.startswith('{"$sagaway_codec":"aesgcm:') and MARK not in args


async def test_a_process_without_compress_names_the_codec_it_lacks(db_url: str) -> None:
    """Rows written with Compress and Encrypt, read by a process that has the key but not
    Compress: the workflow (its input) and the signal (its payload) suspend it with an error
    naming 'zlib' and Compress, not a key id it has."""
    kid_a = key_id(_raw(KEY_A))
    big = MARK * 40  # long and repetitive: Compress keeps it
    worker = codecs_app.build(db_url, Encrypt(keys=[KEY_A]))
    client = codecs_app.build(db_url, [Compress(), Encrypt(keys=[KEY_A])])
    async with worker, client.connect():
        await client.workflow("kyc.wait", big).execute(idempotency_key="zip-1")
        await worker.workflow("kyc.wait", "p").execute(idempotency_key="zip-2")
        await _reaches(worker, "zip-2", sw.WorkflowStatus.WAITING)
        await client.signal("approve").send("zip-2", big)
        for key in ("zip-1", "zip-2"):
            await _reaches(worker, key, sw.WorkflowStatus.SUSPENDED)
            d = await worker.get_workflow(key).describe()
            assert d.error is not None and d.error["type"] == "sagaway.errors.PayloadKeyError"
            message = d.error["message"]
            assert "compressed with 'zlib' (sw.codecs.Compress)" in message, message
            assert "add sw.codecs.Compress() to Manager(codec=...)" in message, message
            assert "key id" not in message, message  # the key is there: not the problem
    (args,) = raw_sql(db_url, "SELECT args FROM workflows WHERE key = 'zip-1'")[0]
    assert args.startswith(f'{{"$sagaway_codec":"zlib,aesgcm:{kid_a}"')
    assert "unopened" not in args  # the note of why is never stored
    # With Compress added, both go on from where they were.
    healed = codecs_app.build(db_url, [Compress(), Encrypt(keys=[KEY_A])])
    async with healed:
        await healed.retry("zip-2")
        assert await healed.get_workflow("zip-2").result(timeout=30) == f"p approved: {big}"
        await healed.retry("zip-1")
        await healed.signal("approve").send("zip-1", "ok")
        assert await healed.get_workflow("zip-1").result(timeout=30) == f"{big} approved: ok"


def test_a_missing_codec_or_key_is_named_by_every_reader() -> None:
    """The chain names what it lacks (codec, key id, both); a process with no codec at all
    names every codec the envelope lists; a row written back unopened loses the note."""
    from sagaway import serialization

    big = json.dumps(MARK * 40)
    kid_a, kid_b = key_id(_raw(KEY_A)), key_id(_raw(KEY_B))
    sealed = sw.codecs.Chain([Compress(), Encrypt(keys=[KEY_A])]).seal(big)
    cases = [
        ([Encrypt(keys=[KEY_A])], ["compressed with 'zlib' (sw.codecs.Compress)"], "key id"),
        ([Compress()], [f"encrypted with key id {kid_a!r} (sw.codecs.Encrypt)"], "zlib"),
        ([Compress(), Encrypt(keys=[KEY_B])], [f"key id {kid_a!r}", kid_b], "zlib"),
    ]
    for codecs, named, absent in cases:
        chain = sw.codecs.Chain(codecs)
        with pytest.raises(sw.PayloadKeyError) as raised:
            chain.open(sealed)
        for part in named:
            assert part in str(raised.value)
        assert absent not in str(raised.value)
        noted = chain.try_open(sealed)
        assert noted is not None and noted != sealed
        with pytest.raises(sw.PayloadKeyError) as decoded:
            serialization.load_json(noted, "result of activity 'a'")
        assert str(decoded.value).startswith("stored result of activity 'a' could not be opened")
        assert str(raised.value) in str(decoded.value)
        assert chain.seal(noted) == sealed  # written back as it was read from the database
    with pytest.raises(sw.PayloadKeyError) as bare:
        serialization.load_json(sealed, "input")  # no codec in this process at all
    assert "compressed with 'zlib' (sw.codecs.Compress) and encrypted with key id" in str(
        bare.value
    )
    assert bare.value.key_id == kid_a
