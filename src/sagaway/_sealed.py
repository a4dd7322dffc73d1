"""Payloads sealed by ``sagaway.codecs``: how their envelope is recognised, and why one could
not be opened here (the codec this process lacks, the key id it needs), for every reader.

A process's codec chain notes why it could not open a payload (``note_unopened``) on the text
it hands on; the decoder that then meets the still-sealed text raises ``sealed_error`` with that
reason. The note is never stored: sealing removes it (``without_note``).
"""

from __future__ import annotations

import json

from sagaway import errors

RESERVED_KEY = "$sagaway_codec"
"""The key of a codec envelope: a value from outside holding it at top level is refused."""

SEALED_PREFIX = '{"$sagaway_codec":'
"""How a payload sealed by ``sagaway.codecs`` begins in its column (a JSON envelope)."""

SEALED_MARKER = "«encrypted»"
"""What readers without the codec's keys show in place of a sealed payload."""


def is_sealed(text: str | None) -> bool:
    """True for a payload still sealed by a codec (not opened by this process)."""
    return text is not None and text.startswith(SEALED_PREFIX)


def is_bound(text: str | None) -> bool:
    """True for a payload still sealed for its place (envelope v2: see ``sagaway.codecs``),
    which opens only where it was stored."""
    if not is_sealed(text):
        return False
    assert text is not None
    try:
        envelope = json.loads(text)
    except ValueError:
        return False
    return isinstance(envelope, dict) and envelope.get("v") == 2


def refuse_envelope(text: str, what: str) -> None:
    """``PayloadError`` when the JSON ``text`` of a value (not yet sealed) is an object with
    the reserved envelope key at top level: stored, it would be taken for a sealed payload (a
    forged envelope that no codec opens, or a compressed bomb)."""
    if f'"{RESERVED_KEY}"' not in text:  # the usual payload: one C string scan
        return
    try:
        value = json.loads(text)
    except ValueError:
        return
    if isinstance(value, dict) and RESERVED_KEY in value:
        raise errors.PayloadError(
            f"{what} is a JSON object with the key {RESERVED_KEY!r}, which Sagaway reserves "
            "for its codec envelopes (a value holding it would be read as a sealed payload): "
            "rename that key"
        )


_UNOPENED = ',"$sagaway_unopened":'
"""Added to a sealed payload this process could not open, with why (see ``note_unopened``)."""


def note_unopened(text: str, reason: str) -> str:
    """The sealed ``text`` with why it could not be opened here, for whoever decodes it (a
    process's codec chain knows; the decoder does not). Never stored: sealing removes it."""
    return f"{without_note(text)[:-1]}{_UNOPENED}{json.dumps(reason)}}}"


def without_note(text: str) -> str:
    at = text.rfind(_UNOPENED)
    return text if at < 0 else text[:at] + "}"


_SHIPPED_CODECS = {
    "zlib": ("compressed with 'zlib' (sw.codecs.Compress)", "sw.codecs.Compress()"),
    "ref": ("offloaded by 'ref' (sw.codecs.Offload)", "sw.codecs.Offload(...) over its store"),
}


def lacking(tags: list[str]) -> str:
    """What sealed a payload with the envelope entries ``tags``, for a process whose codec
    has none of those codecs: each named, with what to add."""
    sealed: list[str] = []
    add: list[str] = []
    for tag in tags:
        name, _, param = tag.partition(":")
        if name == "aesgcm":
            sealed.append(f"encrypted with key id {param!r} (sw.codecs.Encrypt)")
            add.append(f"sw.codecs.Encrypt(keys=[...]) with the key of id {param!r}")
        else:
            shipped = _SHIPPED_CODECS.get(name, (f"sealed by codec {name!r}", "that codec"))
            sealed.append(shipped[0])
            add.append(shipped[1])
    return (
        f"{' and '.join(sealed)}, which this process's codec does not include: add "
        f"{' and '.join(add)} to Manager(codec=...)"
    )


def _read(text: str) -> tuple[str, str | None]:
    """The codec chain of a sealed payload, and why it was not opened here (if noted)."""
    try:
        envelope = json.loads(text)
        chain = str(envelope.get("$sagaway_codec", "?"))
        reason = envelope.get("$sagaway_unopened")
    except (ValueError, AttributeError):
        return "?", None
    return chain, None if reason is None else str(reason)


def sealed_error(text: str, what: str) -> errors.PayloadKeyError:
    """Why a sealed payload could not be read here: the reason the process's codec gave (the
    codec it lacks, the key id it needs), else the codecs it needs."""
    chain, reason = _read(text)
    key_ids = [t.split(":", 1)[1] for t in chain.split(",") if t.startswith("aesgcm:")]
    key_id = key_ids[0] if key_ids else None
    if reason is not None:
        return errors.PayloadKeyError(f"stored {what} could not be opened: {reason}", key_id)
    # Not opened by a codec chain: this process has none (or the payload was altered).
    return errors.PayloadKeyError(
        f"stored {what} is {lacking(chain.split(','))} (or the data was altered)", key_id
    )


def unopened_reason(text: str) -> str | None:
    """Why a process's codec chain could not open the sealed ``text`` (None: no chain tried,
    as in a process without a codec)."""
    return _read(text)[1]


def note(text: str) -> str:
    chain, reason = _read(text)
    if reason is not None:
        return reason
    needs = [
        f"key id {t.split(':', 1)[1]!r}" if t.startswith("aesgcm:") else f"codec {t!r}"
        for t in chain.split(",")
    ]
    return f"not opened here: needs {' and '.join(needs)}"
