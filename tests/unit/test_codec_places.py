"""Envelope v2: each encrypted payload is bound to its place (run, field, step, signal,
schedule) as AES-GCM associated data (docs/codecs.md, docs/security.md). No database here: the
chain alone; tests/integration/test_codec_attacks.py moves rows with SQL on every backend."""

from __future__ import annotations

import json
import logging

import pytest

import sagaway as sw
from sagaway.codecs import Chain, Compress, Encrypt, key_id
from sagaway.codecs import _places as places
from sagaway.states import StepKind, StepStatus
from sagaway.store.records import StepRecord
from tests.integration.codecs_app import V1_ARGS, V1_COMPRESSED, V1_KEY

KEY = V1_KEY
NEW_KEY = bytes(range(32, 64))

A_ARGS = places.run("run-a", "args")
B_ARGS = places.run("run-b", "args")


def _chain(**options: bool | None) -> Chain:
    return Chain([Compress(), Encrypt(keys=[KEY], **options)])  # type: ignore[arg-type]


def _envelope(text: str) -> dict[str, object]:
    value = json.loads(text)
    assert isinstance(value, dict)
    return value


def test_a_payload_opens_at_its_place_only() -> None:
    chain = _chain()
    sealed = chain.seal('{"payee": "ALICE", "amount": 100}', place=A_ARGS)
    envelope = _envelope(sealed)
    assert envelope["v"] == 2 and envelope["at"] == ["run", "run-a", "args"]
    assert envelope["$sagaway_codec"] == f"aesgcm:{key_id(KEY)}"
    assert chain.open(sealed, place=A_ARGS, sealed=True) == '{"payee": "ALICE", "amount": 100}'
    with pytest.raises(sw.PayloadError) as refused:
        chain.open(sealed, place=B_ARGS, sealed=True)
    assert str(refused.value) == (
        "a stored payload sealed for the arguments of run 'run-a' was found in the arguments "
        "of run 'run-b': it was copied there behind Sagaway's back (from another run, field, "
        "step or signal); refused"
    )
    # Every part of the place counts: the field, the step, the signal, the schedule.
    for other in (
        places.run("run-a", "result"),
        ("run", "run-a", "step", "1", "result"),
        places.signal("run-a", "approve"),
        places.schedule("run-a"),
    ):
        with pytest.raises(sw.PayloadError, match="was found in"):
            chain.open(sealed, place=other)


def test_the_place_the_envelope_names_is_not_trusted() -> None:
    chain = _chain()
    sealed = chain.seal('"approve A"', place=places.signal("run-a", "approve"))
    # Relabelled to look like it belongs in run B: the decryption uses run B's place (where it
    # is read), which is not the one it was sealed for.
    relabelled = sealed.replace('"run-a"', '"run-b"')
    with pytest.raises(sw.PayloadKeyError, match="does not decrypt with that key"):
        chain.open(relabelled, place=places.signal("run-b", "approve"), sealed=True)
    # A label torn off (v1, bound to nothing) or garbled does not open it either.
    envelope = _envelope(sealed)
    downgraded = json.dumps(
        {"$sagaway_codec": envelope["$sagaway_codec"], "data": envelope["data"]},
        separators=(",", ":"),
    )
    with pytest.raises(sw.PayloadKeyError, match="does not decrypt"):
        chain.open(downgraded, place=places.signal("run-b", "approve"), sealed=True)
    garbled = sealed.replace('"at":["run","run-a","signal","approve"]', '"at":7')
    with pytest.raises(sw.PayloadKeyError, match="does not decrypt"):
        chain.open(garbled, place=places.signal("run-b", "approve"), sealed=True)


def test_a_v1_payload_marked_v2_does_not_open() -> None:
    upgraded = V1_ARGS.replace('","data"', '","v":2,"at":["run","run-b","args"],"data"')
    with pytest.raises(sw.PayloadKeyError, match="does not decrypt"):
        _chain().open(upgraded, place=B_ARGS, sealed=True)


def test_rows_sealed_before_binding_open_and_the_setting_refuses_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="sagaway.codecs")
    default = _chain()
    assert default.open(V1_ARGS, place=B_ARGS, sealed=True) == '{"payee": "BOB", "amount": 5}'
    assert default.open(V1_COMPRESSED, place=B_ARGS, sealed=True) == json.dumps("x" * 300)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1  # once per chain, not per payload
    assert "allow_unbound=False" in warnings[0] and "envelope v1" in warnings[0]
    caplog.clear()
    assert _chain(allow_unbound=True).open(V1_ARGS, place=B_ARGS) == (
        '{"payee": "BOB", "amount": 5}'
    )
    assert caplog.records == []
    with pytest.raises(sw.PayloadError) as refused:
        _chain(allow_unbound=False).open(V1_ARGS, place=B_ARGS, sealed=True)
    assert str(refused.value).startswith(
        "a stored payload in the arguments of run 'run-b' is encrypted without its place "
        "(envelope v1,"
    )
    assert "allow_unbound=True" in str(refused.value)
    # What is refused is passed on unopened, with why, to whoever decodes it.
    handed_on = _chain(allow_unbound=False).try_open(V1_ARGS, place=B_ARGS, sealed=True)
    with pytest.raises(sw.PayloadKeyError, match="encrypted without its place"):
        sw.serialization.load_json(handed_on, "arguments")
    with pytest.raises(TypeError, match="allow_unbound"):
        Encrypt(keys=[KEY], allow_unbound="no")  # type: ignore[arg-type]


def test_a_bound_payload_needs_its_place_and_a_known_version() -> None:
    chain = _chain()
    sealed = chain.seal('"x"', place=A_ARGS)
    with pytest.raises(sw.PayloadError, match="opens only there: it was read without its place"):
        chain.open(sealed)
    newer = sealed.replace('"v":2', '"v":3')
    with pytest.raises(sw.PayloadError, match="envelope version 3, which this version"):
        chain.open(newer, place=A_ARGS)
    # Without a place, sealing gives v1 (bound to nothing), as before.
    assert "v" not in _envelope(chain.seal('"x"'))


def test_rotation_reads_bound_payloads_of_the_old_key() -> None:
    old = Chain([Compress(), Encrypt(keys=[KEY])])
    rotated = Chain([Compress(), Encrypt(keys=[NEW_KEY, KEY])])
    big = json.dumps({"note": "y" * 2000})
    sealed = old.seal(big, place=A_ARGS)
    assert _envelope(sealed)["$sagaway_codec"] == f"zlib,aesgcm:{key_id(KEY)}"
    assert rotated.open(sealed, place=A_ARGS, sealed=True) == big
    assert rotated.open(V1_ARGS, place=B_ARGS) == '{"payee": "BOB", "amount": 5}'
    resealed = rotated.seal(big, place=A_ARGS)
    assert _envelope(resealed)["$sagaway_codec"] == f"zlib,aesgcm:{key_id(NEW_KEY)}"
    with pytest.raises(sw.PayloadKeyError, match="not among the configured keys"):
        old.open(resealed, place=A_ARGS)


def test_compress_alone_binds_nothing() -> None:
    chain = Chain(Compress(min_size=1))
    sealed = chain.seal(json.dumps("z" * 500), place=A_ARGS)
    assert "v" not in _envelope(sealed)
    assert chain.open(sealed, place=B_ARGS) == json.dumps("z" * 500)


def _step(kind: StepKind, call_id: str = "3", name: str = "approve") -> StepRecord:
    return StepRecord("run-a", call_id, kind, name, StepStatus.COMPLETED, 1, "1", None, 0.0, 1.0)


def test_places_name_their_slot() -> None:
    assert places.step(_step(StepKind.ACTIVITY), "result") == (
        "run",
        "run-a",
        "step",
        "3",
        "result",
    )
    # The store copies a received signal's payload into the step as it was sealed.
    assert places.step(_step(StepKind.SIGNAL), "result") == places.signal("run-a", "approve")
    assert places.step(_step(StepKind.SIGNAL), "error") == places.step_error("run-a", "3")
    assert places.encode(places.signal("r", 'a","b')) == b'["run","r","signal","a\\",\\"b"]'
    described = {
        places.describe(places.run("r", "result")): "the result of run 'r'",
        places.describe(places.step_error("r", "2/1")): "the error of step 2/1 of run 'r'",
        places.describe(places.signal("r", "go")): "signal 'go' of run 'r'",
        places.describe(
            places.signal_rejected("r", "go")
        ): "why signal 'go' of run 'r' was refused",
        places.describe(places.schedule("nightly")): "the arguments of schedule 'nightly'",
        places.describe(None): "an unknown place",
        places.describe(("elsewhere",)): 'place ["elsewhere"]',
    }
    assert list(described) == list(described.values())


def test_a_debounced_start_s_arguments_open_in_its_burst_only() -> None:
    """A start that joins a burst cannot know the run it writes into: its arguments are bound
    to the workflow and the debounce key, and opened there (or under the run: a fork's copy)."""
    from sagaway.codecs._reseal import args_place
    from sagaway.store.records import WorkflowRecord

    chain = _chain()
    sealed = chain.seal('{"user": "u-1"}', place=places.burst("reindex", "u-1"))

    def record(name: str, key: str | None, args: str = sealed) -> WorkflowRecord:
        return WorkflowRecord(
            run_id="run-b", key="k", name=name, args=args, args_hash="",
            status=sw.WorkflowStatus.PENDING, result=None, error=None, parent_key=None,
            created_at=0.0, updated_at=0.0, ended_at=None, lease_owner=None,
            lease_expires_at=None, next_run_at=None, suspend_count=0, debounce_key=key,
        )  # fmt: skip

    assert args_place(chain, record("reindex", "u-1")) == places.burst("reindex", "u-1")
    assert chain.open(sealed, place=places.burst("reindex", "u-1")) == '{"user": "u-1"}'
    for elsewhere in (record("reindex", "u-2"), record("purge", "u-1"), record("reindex", None)):
        place = args_place(chain, elsewhere)
        assert place == places.run("run-b", "args")  # not opened as a burst's: refused there
        with pytest.raises(sw.PayloadError, match="debounced start of 'reindex'"):
            chain.open(sealed, place=place, sealed=True)
    own = chain.seal('{"user": "u-1"}', place=places.run("run-b", "args"))  # a fork's copy
    assert args_place(chain, record("reindex", "u-1", own)) == places.run("run-b", "args")
