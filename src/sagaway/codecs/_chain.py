"""Codecs and the chain that seals stored payloads into an envelope and opens them again.

The envelope is one JSON object in the payload's text column::

    {"$sagaway_codec":"zlib,aesgcm:3f9a1c2b","v":2,"at":["run","<run id>","args"],"data":"<base64>"}

``$sagaway_codec`` lists the codecs applied, in the order they were applied on write (each
entry is a codec name, with a parameter after ``:`` such as the key id); ``data`` is the
result, base64-encoded. Opening undoes them in reverse order, choosing each codec by name,
so the chain configured for reading need not be the one that wrote (rotation, new codecs).
A payload no codec changed (Compress that would not save space) stays plain JSON.

Version 2 (``"v":2``): a codec that binds (Encrypt) was given the payload's place
(``_places``), which ``at`` names for error messages only; opening gives the codec the place
the payload is read from, so it opens nowhere else. Version 1 (no ``v``, written before
places were bound) is read unless the codec refuses it (Encrypt's ``allow_unbound=False``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
from collections.abc import Sequence
from typing import Protocol, cast, runtime_checkable

from sagaway import _sealed, errors, serialization
from sagaway.codecs import _places
from sagaway.codecs._places import Place

logger = logging.getLogger("sagaway.codecs")


@runtime_checkable
class Codec(Protocol):
    """One transformation of payload bytes."""

    name: str
    """Written in the envelope (before ``:``); opening picks the codec by it."""

    def encode(self, data: bytes) -> tuple[str, bytes] | None:
        """``(tag, new bytes)``, or None to leave the data as it is (not worth it here)."""
        ...

    def decode(self, tag: str, data: bytes) -> bytes:
        """Undo ``encode`` for an entry ``tag`` it wrote; ``PayloadError`` when it cannot."""
        ...


@runtime_checkable
class BindingCodec(Protocol):
    """A codec that binds a payload to its place (Encrypt: the place is AES-GCM's associated
    data), so that a payload copied to another place does not open there."""

    name: str

    def encode_at(self, data: bytes, place: bytes) -> tuple[str, bytes] | None: ...

    def decode_at(self, tag: str, data: bytes, place: bytes) -> bytes: ...


class HashKeys(Protocol):
    """A codec that can key the idempotency hash of arguments (Encrypt)."""

    def current_hash_key(self) -> tuple[str, bytes]: ...

    def hash_key(self, key_id: str) -> bytes | None: ...


class Chain:
    """Codecs applied in order on write, in reverse on read."""

    def __init__(
        self,
        codecs: Codec | Sequence[Codec],
        *,
        limit: int = serialization.DEFAULT_PAYLOAD_LIMIT,
    ) -> None:
        self.limit = limit
        """Bytes an opened payload may have: decompression stops beyond it (PayloadError)."""
        self.codecs: tuple[Codec, ...] = (codecs,) if isinstance(codecs, Codec) else tuple(codecs)
        for codec in self.codecs:
            if not isinstance(codec, Codec):
                raise TypeError(f"not a codec: {codec!r} (needs name, encode and decode)")
        self._by_name = {c.name: c for c in self.codecs}
        self._required = {c.name for c in self.codecs if getattr(c, "requires_sealed", False)}
        """Codecs every payload of a sealed field must have passed (Encrypt, unless told
        ``allow_unsealed``): a plain or merely compressed payload there was not written by us."""
        self._binding: dict[str, BindingCodec] = {
            c.name: c for c in self.codecs if isinstance(c, BindingCodec)
        }
        """Codecs that bind a payload to its place (Encrypt): given it on write and read."""
        hashing = [c for c in self.codecs if hasattr(c, "current_hash_key")]
        self._hashing: HashKeys | None = cast("HashKeys", hashing[0]) if hashing else None
        self._warned_unbound = False

    def seal(self, text: str, *, place: Place | None = None) -> str:
        """The text to store for the payload ``text`` at ``place`` (see ``_places``): codecs
        that bind (Encrypt) make it open there only (envelope v2). Without a place, the
        envelope is v1 (bound to nothing)."""
        if text.startswith(_sealed.SEALED_PREFIX):
            # Already sealed: a record read and written back unopened (without the note of why);
            # refused plain text goes back as it was read.
            bare = _sealed.without_note(text)
            plain = f'{_sealed.SEALED_PREFIX}"{_PLAIN}","data":"'
            return (
                base64.b64decode(bare[len(plain) : -2]).decode() if bare.startswith(plain) else bare
            )
        data = text.encode()
        at = None if place is None else _places.encode(place)
        tags: list[str] = []
        bound = False
        for codec in self.codecs:
            binder = None if at is None else self._binding.get(codec.name)
            if binder is not None and at is not None:
                done = binder.encode_at(data, at)
                bound = bound or done is not None
            else:
                done = codec.encode(data)
            if done is not None:
                tag, data = done
                tags.append(tag)
        if not tags:
            return text
        # The same text as json.dumps of the envelope, built directly (base64 needs no escape).
        chain = json.dumps(",".join(tags))
        where = f',"v":2,"at":{at.decode()}' if bound and at is not None else ""
        return f'{_sealed.SEALED_PREFIX}{chain}{where},"data":"{base64.b64encode(data).decode()}"}}'

    def open(self, text: str, *, place: Place | None = None, sealed: bool = False) -> str:
        """The payload sealed in ``text``, stored at ``place`` (plain text is returned as it
        is, unless ``sealed``: a field Sagaway always seals, where plain text is refused while a
        codec requires it). A payload bound to another place is refused (``PayloadError``)."""
        if not text.startswith(_sealed.SEALED_PREFIX):
            if sealed and self._required:
                raise errors.PayloadError(_unsealed(self._required, "plain JSON"))
            return text
        try:
            envelope = json.loads(text)
            data = base64.b64decode(envelope["data"], validate=True)
            tags = str(envelope["$sagaway_codec"]).split(",")
            version = envelope.get("v", 1)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise errors.PayloadError(
                f"a stored payload looks sealed but its envelope is damaged: {text[:120]!r}"
            ) from None
        if tags == [_PLAIN]:  # plain text refused by try_open, read back unchanged
            if sealed and self._required:
                raise errors.PayloadError(_unsealed(self._required, "plain JSON"))
            return data.decode()
        if version not in (1, 2):
            raise errors.PayloadError(
                f"a stored payload has envelope version {version!r}, which this version of "
                "Sagaway does not read: it was written by a newer one (upgrade this process)"
            )
        if sealed and self._required - {t.split(":", 1)[0] for t in tags}:
            raise errors.PayloadError(_unsealed(self._required, f"sealed only by {tags}"))
        missing = [tag for tag in tags if tag.split(":", 1)[0] not in self._by_name]
        if missing:
            key_ids = [t.split(":", 1)[1] for t in missing if t.startswith("aesgcm:")]
            raise errors.PayloadKeyError(
                f"a stored payload is {_sealed.lacking(missing)}",
                key_ids[0] if key_ids else None,
            )
        if version == 1:
            unbound = self._check_unbound(tags, place)
            opened = self._decode(tags, data, None).decode()
            if unbound and not self._warned_unbound:
                self._warned_unbound = True
                logger.warning(_UNBOUND_READ)
            return opened
        sealed_for = _places.from_envelope(envelope.get("at"))
        if place is None:
            raise errors.PayloadError(
                f"a stored payload is bound to {_places.describe(sealed_for)} and opens only "
                "there: it was read without its place (give Chain.open(..., place=...))"
            )
        try:
            return self._decode(tags, data, place).decode()
        except errors.PayloadError:
            if sealed_for is None or sealed_for == place:
                raise
            # What the envelope says is informative only: the decryption above used the place
            # the payload was read from, never the one it names.
            raise errors.PayloadError(
                f"a stored payload sealed for {_places.describe(sealed_for)} was found in "
                f"{_places.describe(place)}: it was copied there behind Sagaway's back (from "
                "another run, field, step or signal); refused"
            ) from None

    def _decode(self, tags: list[str], data: bytes, place: Place | None) -> bytes:
        at = None if place is None else _places.encode(place)
        for tag in reversed(tags):
            name = tag.split(":", 1)[0]
            binder = None if at is None else self._binding.get(name)
            if binder is not None and at is not None:
                data = binder.decode_at(tag, data, at)
                continue
            codec = self._by_name[name]
            within = getattr(codec, "decode_within", None)
            data = codec.decode(tag, data) if within is None else within(tag, data, self.limit)
        return data

    def _check_unbound(self, tags: list[str], place: Place | None) -> bool:
        """Envelope v1 (no place) from a codec that binds: ``PayloadError`` when the codec
        refuses those (Encrypt's ``allow_unbound=False``); True when it leaves them to us
        (None: read, with a warning once)."""
        warn = False
        for tag in tags:
            codec = self._binding.get(tag.split(":", 1)[0])
            allowed = True if codec is None else getattr(codec, "allow_unbound", True)
            if allowed is False:
                where = "" if place is None else f" in {_places.describe(place)}"
                raise errors.PayloadError(
                    f"a stored payload{where} is encrypted without its place (envelope v1, "
                    "written before Sagaway bound payloads to their run, field and step), and "
                    "Encrypt(..., allow_unbound=False) refuses those: such a payload may have "
                    "been copied from another row. To read rows written before the upgrade, "
                    "give allow_unbound=True while they remain (docs/codecs.md)"
                )
            warn = warn or allowed is None
        return warn

    def try_open(
        self, text: str | None, *, place: Place | None = None, sealed: bool = False
    ) -> str | None:
        """``open``, or else the sealed text with why it could not be opened here: whoever
        decodes it then gets that error (``serialization.load_json``). Plain text refused in
        a ``sealed`` field is handed on in an envelope of its own (tag ``plain``): decoded, it
        raises that error; written back, it is stored as it was read."""
        if text is None:
            return None
        if not text.startswith(_sealed.SEALED_PREFIX):
            if not (sealed and self._required):
                return text
            data = base64.b64encode(text.encode()).decode()
            envelope = f'{_sealed.SEALED_PREFIX}"{_PLAIN}","data":"{data}"}}'
            return _sealed.note_unopened(envelope, _unsealed(self._required, "plain JSON"))
        try:
            return self.open(text, place=place, sealed=sealed)
        except errors.PayloadError as exc:
            return _sealed.note_unopened(text, str(exc))

    # ----------------------------------------------------------- idempotency hash

    def args_hash(self, args_json: str) -> str:
        """The stored hash of arguments: keyed (HMAC) when a codec gives a key, so the
        column cannot be used to guess the arguments; else the plain digest."""
        if self._hashing is None:
            return serialization.args_hash(args_json)
        key_id, key = self._hashing.current_hash_key()
        return f"hmac:{key_id}:{_hmac(key, args_json)}"

    def hash_matches(self, stored: str, args_json: str) -> bool:
        """True when ``stored`` (any key still configured, or the plain digest) is the hash
        of ``args_json``."""
        if not stored.startswith("hmac:"):
            return hmac.compare_digest(stored, serialization.args_hash(args_json))
        _, key_id, digest = [*stored.split(":", 2), "", ""][:3]
        key = None if self._hashing is None else self._hashing.hash_key(key_id)
        return key is not None and hmac.compare_digest(digest, _hmac(key, args_json))


_UNBOUND_READ = (
    "read a payload encrypted without its place (envelope v1, written before Sagaway bound "
    "payloads to their place): such rows could be copied between workflows. Once every row "
    "written before the upgrade has ended and been purged, give Encrypt(..., "
    "allow_unbound=False) to refuse them; allow_unbound=True reads them without this warning "
    "(docs/codecs.md)"
)

_PLAIN = "plain"
"""The envelope tag of plain text refused where a sealed payload is expected (never stored)."""


def _unsealed(required: set[str], found: str) -> str:
    return (
        f"a stored payload is {found} where Sagaway stores it sealed by {sorted(required)}: the "
        "row was written behind Sagaway's back (or before the codec was configured); refused. "
        "To read rows written before Encrypt was configured, give Encrypt(..., "
        "allow_unsealed=True) while they remain (docs/codecs.md)"
    )


def _hmac(key: bytes, args_json: str) -> str:
    canonical = json.dumps(json.loads(args_json), sort_keys=True, separators=(",", ":"))
    return hmac.new(key, canonical.encode(), hashlib.sha256).hexdigest()
