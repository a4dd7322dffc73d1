"""The audit trail's pure parts: reasons kept bounded and on one line, notes, the public
entry, and who the Engine Server says a caller is."""

from __future__ import annotations

import json

import pytest

import sagaway as sw
from sagaway._engine import audit
from sagaway.principals import Principal, current_principal, local_actor, set_current_principal
from sagaway.server import audit as server_audit
from sagaway.store.records import AuditRecord


def test_reasons_are_kept_on_one_line_and_bounded() -> None:
    assert audit.check_reason(None) is None
    assert audit.check_reason("fixed the bug") == "fixed the bug"
    assert audit.check_reason("a\nb\x1b[2J\x9b\x00") == "a\\nb\\x1b[2J\\x9b\\x00"
    assert audit.check_reason("é" * 1000) == "é" * 1000
    with pytest.raises(ValueError, match="at most 1000 characters \\(it has 1001\\)"):
        audit.check_reason("x" * 1001)
    with pytest.raises(ValueError, match="at most 1000"):  # escapes count: what is kept
        audit.check_reason("\n" * 600)
    with pytest.raises(ValueError, match="lone surrogates"):
        audit.check_reason("\ud800")
    with pytest.raises(TypeError, match="reason must be a string"):
        audit.check_reason(42)  # type: ignore[arg-type]


def test_a_note_is_made_by_this_process_for_the_current_principal() -> None:
    note = audit.note("fork", "why", from_step=3, force=None, source_key="k")
    assert (note.action, note.actor, note.reason) == ("fork", local_actor(), "why")
    assert json.loads(note.details or "") == {"from_step": 3, "source_key": "k"}  # None left out
    assert note.on_behalf_of is None and note.entry_id != audit.note("fork").entry_id
    assert audit.note("retry").details is None
    previous = current_principal()
    set_current_principal(Principal("alice"))
    try:
        assert audit.note("cancel").on_behalf_of == "alice"
    finally:
        set_current_principal(previous)
    with pytest.raises(ValueError, match="4096 bytes"):
        audit.note("purge", statuses=["x" * 5000])


def test_audit_modes_are_checked() -> None:
    with pytest.raises(ValueError, match="audit must be 'operator'"):
        sw.Manager("sqlite:///unused.db", audit="everything")
    assert sw.Manager("sqlite:///unused.db", audit="all").options.audit == "all"


def record(**changes: object) -> AuditRecord:
    fields: dict[str, object] = {
        "seq": 1,
        "at": 1.0,
        "actor": "ops-token",
        "on_behalf_of": None,
        "action": "cancel",
        "run_id": "r",
        "target": "k",
        "reason": None,
        "details": None,
    }
    fields.update(changes)
    return AuditRecord(**fields)  # type: ignore[arg-type]


def test_the_public_entry() -> None:
    assert audit.entry(record()).who == "ops-token"
    assert audit.entry(record(on_behalf_of="ops-token")).who == "ops-token"
    assert audit.entry(record(on_behalf_of="alice")).who == "alice (via ops-token)"
    assert audit.entry(record(details='{"a": 1}')).details == {"a": 1}
    # A row changed by hand is shown as it is, not refused.
    assert audit.entry(record(details="[1")).details == {"unreadable": "[1"}
    assert audit.entry(record(details="[1]")).details == {"unreadable": "[1]"}


class Peer:
    def __init__(self, address: str) -> None:
        self.address = address

    def peer(self) -> str:
        return self.address


def test_who_the_server_says_a_caller_is() -> None:
    previous = current_principal()
    try:
        set_current_principal(None)
        server_audit.set_call(Peer("ipv4:10.1.2.3:51234"))
        assert server_audit.caller(token=False) == "anonymous@10.1.2.3"
        assert server_audit.caller(token=True) == "default"
        server_audit.set_call(Peer("ipv6:[::1]:5000"))
        assert server_audit.caller(token=False) == "anonymous@::1"
        server_audit.set_call(Peer("unix:/tmp/s"))
        assert server_audit.caller(token=False) == "anonymous@unix"
        server_audit.set_call(None)
        assert server_audit.caller(token=False) == "anonymous@unknown"
        set_current_principal(Principal("ops-token"))  # once roles authenticate callers
        assert server_audit.caller(token=True) == "ops-token"
    finally:
        set_current_principal(previous)
        server_audit.set_call(None)
