"""The codecs Sagaway ships: Compress (zlib), Encrypt (AES-256-GCM), Offload (claim check)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
import tempfile
import zlib
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from sagaway import errors
from sagaway.randomness import RANDOM
from sagaway.serialization import DEFAULT_PAYLOAD_LIMIT


class Compress:
    """zlib, kept only when it makes the payload smaller (short JSON rarely shrinks)."""

    name = "zlib"

    def __init__(self, level: int = 6, min_size: int = 256) -> None:
        self.level = level
        self.min_size = min_size
        """Payloads shorter than this are left alone (not worth a try)."""

    def encode(self, data: bytes) -> tuple[str, bytes] | None:
        if len(data) < self.min_size:
            return None
        packed = zlib.compress(data, self.level)
        return ("zlib", packed) if len(packed) < len(data) else None

    def decode(self, tag: str, data: bytes) -> bytes:
        return self.decode_within(tag, data, DEFAULT_PAYLOAD_LIMIT)

    def decode_within(self, tag: str, data: bytes, limit: int) -> bytes:
        """``decode``, refusing (``PayloadError``) a payload that would expand beyond ``limit``
        bytes: never more than ``limit + 1`` bytes are inflated (a compressed bomb stops
        there)."""
        inflater = zlib.decompressobj()
        try:
            out = inflater.decompress(data, limit + 1)
            if len(out) <= limit and not inflater.eof:
                out += inflater.flush()
        except zlib.error as exc:
            raise errors.PayloadError(f"a compressed payload is damaged: {exc}") from None
        if len(out) > limit:
            raise errors.PayloadError(
                f"a compressed payload expands beyond the payload limit of {limit} bytes: "
                "refused unread (Sagaway never stores a payload that large; the row was "
                "written outside it)"
            )
        if not inflater.eof:
            raise errors.PayloadError("a compressed payload is damaged: it is truncated")
        return out


def _aesgcm() -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise ImportError(
            "sagaway.codecs.Encrypt needs the 'crypto' extra: pip install 'sagaway[crypto]'"
        ) from None
    return AESGCM


def key_bytes(key: bytes | str) -> bytes:
    """A 32-byte key from bytes or a base64 string (``ValueError`` otherwise)."""
    if isinstance(key, str):
        try:
            key = base64.b64decode(key.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("an encryption key string must be base64 (of 32 bytes)") from None
    if not isinstance(key, bytes) or len(key) != 32:
        raise ValueError("an encryption key is 32 bytes (AES-256); use Encrypt.generate_key()")
    return key


def key_id(key: bytes) -> str:
    """A short public name of a key (a digest: it reveals nothing of the key)."""
    return hashlib.sha256(b"sagaway key id\0" + key).hexdigest()[:12]


class Encrypt:
    """AES-256-GCM with a random 96-bit nonce per payload; the key id travels in the envelope.

    ``keys[0]`` encrypts; any key of the list decrypts what it encrypted, so rotation is: put
    the new key first, keep the old ones until no stored row needs them.

    Each payload's associated data names its place (run, field, step, signal: see
    ``sagaway.codecs._places``), so a ciphertext copied to another row does not open there.
    """

    name = "aesgcm"

    def __init__(
        self,
        keys: list[bytes | str] | tuple[bytes | str, ...],
        *,
        allow_unsealed: bool = False,
        allow_unbound: bool | None = None,
    ) -> None:
        self.requires_sealed = not allow_unsealed
        """Refuse plain JSON (or a payload not encrypted) where Sagaway stores an encrypted
        one: a row replaced behind Sagaway's back. ``allow_unsealed=True`` reads such rows, for
        the migration of a database written before Encrypt was configured."""
        if allow_unbound not in (None, True, False):
            raise TypeError(f"allow_unbound must be None, True or False, not {allow_unbound!r}")
        self.allow_unbound = allow_unbound
        """Payloads encrypted without their place (envelope v1, written before Sagaway bound
        payloads to their place): None (the default) reads them and logs a warning once,
        True reads them, False refuses them (``PayloadError``) once none should remain."""
        if not keys:
            raise ValueError("Encrypt needs at least one key")
        aesgcm = _aesgcm()
        raw = [key_bytes(k) for k in keys]
        self._ciphers = {key_id(k): aesgcm(k) for k in raw}
        self._hash_keys = {key_id(k): hmac.digest(k, b"sagaway args hash", "sha256") for k in raw}
        self.current_key_id = key_id(raw[0])
        self.key_ids = [key_id(k) for k in raw]

    @staticmethod
    def generate_key() -> str:
        """A new random key, base64 (store it like a password)."""
        return base64.b64encode(secrets.token_bytes(32)).decode()

    def encode(self, data: bytes) -> tuple[str, bytes] | None:
        """Envelope v1: the associated data is the tag alone (kept for ``Chain.seal`` without a
        place, and for custom uses; Sagaway's stores seal with ``encode_at``)."""
        tag = f"aesgcm:{self.current_key_id}"
        return tag, self._seal(data, tag.encode())

    def encode_at(self, data: bytes, place: bytes) -> tuple[str, bytes] | None:
        """Envelope v2: the associated data names the payload's ``place`` too."""
        tag = f"aesgcm:{self.current_key_id}"
        return tag, self._seal(data, _bound(tag, place))

    def decode(self, tag: str, data: bytes) -> bytes:
        return self._open(tag, data, tag.encode())

    def decode_at(self, tag: str, data: bytes, place: bytes) -> bytes:
        return self._open(tag, data, _bound(tag, place))

    def _seal(self, data: bytes, associated: bytes) -> bytes:
        nonce = RANDOM.take(12)  # batched: see sagaway.randomness
        sealed: bytes = self._ciphers[self.current_key_id].encrypt(nonce, data, associated)
        return nonce + sealed

    def _open(self, tag: str, data: bytes, associated: bytes) -> bytes:
        kid = tag.split(":", 1)[1] if ":" in tag else ""
        cipher = self._ciphers.get(kid)
        if cipher is None:
            raise errors.PayloadKeyError(
                f"a stored payload is encrypted with key id {kid!r}, which is not among the "
                f"configured keys {self.key_ids}: add that key to Encrypt(keys=[...])",
                kid,
            )
        from cryptography.exceptions import InvalidTag

        try:
            return bytes(cipher.decrypt(data[:12], data[12:], associated))
        except (InvalidTag, ValueError):
            raise errors.PayloadKeyError(
                f"a stored payload encrypted with key id {kid!r} does not decrypt with that key: "
                "the row was altered, or a different key has the same id",
                kid,
            ) from None

    def current_hash_key(self) -> tuple[str, bytes]:
        return self.current_key_id, self._hash_keys[self.current_key_id]

    def hash_key(self, key_id: str) -> bytes | None:
        return self._hash_keys.get(key_id)


def _bound(tag: str, place: bytes) -> bytes:
    """Associated data of envelope v2: never equal to a v1 one (the tag alone)."""
    return b"sagaway envelope v2\0" + tag.encode() + b"\0" + place


@runtime_checkable
class PayloadStore(Protocol):
    """Where Offload keeps large payloads; the row keeps the reference ``put`` returns."""

    def put(self, data: bytes) -> str: ...

    def get(self, ref: str) -> bytes: ...

    def delete(self, ref: str) -> None: ...


class FileStore:
    """Blobs as files in a directory, named by their SHA-256 (the same bytes are kept once).

    Writes go to a temporary file renamed into place, so a crash never leaves half a blob.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def _path(self, ref: str) -> Path:
        if len(ref) != 64 or any(c not in "0123456789abcdef" for c in ref):
            raise errors.PayloadError(f"not a FileStore reference: {ref[:80]!r}")
        return self.directory / ref

    def put(self, data: bytes) -> str:
        ref = hashlib.sha256(data).hexdigest()
        path = self._path(ref)
        if not path.exists():
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".put-")
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        return ref

    def get(self, ref: str) -> bytes:
        try:
            return self._path(ref).read_bytes()
        except FileNotFoundError:
            raise errors.PayloadError(
                f"offloaded payload {ref} is missing from {self.directory}"
            ) from None

    def delete(self, ref: str) -> None:
        self._path(ref).unlink(missing_ok=True)


class Offload:
    """Claim check: payloads over ``threshold`` bytes (after the codecs before it) go to
    ``store``; the row keeps only the reference. Put it last, after Encrypt, so the blobs
    outside the database are encrypted too."""

    name = "ref"

    def __init__(self, store: PayloadStore, threshold: int = 256 * 1024) -> None:
        self.store = store
        self.threshold = threshold

    def encode(self, data: bytes) -> tuple[str, bytes] | None:
        if len(data) <= self.threshold:
            return None
        return "ref", self.store.put(data).encode()

    def decode(self, tag: str, data: bytes) -> bytes:
        return self.store.get(data.decode())
