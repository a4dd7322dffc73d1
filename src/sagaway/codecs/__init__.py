"""Payload codecs: what Sagaway stores of inputs, results, errors and signals can be
compressed, encrypted and kept outside the database (``Manager(codec=...)``).

See docs/codecs.md for the envelope format, key rotation and what stays in clear.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from sagaway.codecs._basic import (
    Compress,
    Encrypt,
    FileStore,
    Offload,
    PayloadStore,
    key_bytes,
    key_id,
)
from sagaway.codecs._chain import Chain, Codec
from sagaway.codecs._store import CodecStore

KEYS_ENV = "SAGAWAY_CODEC_KEYS"
"""Environment variable with the keys for reading tools (CLI, console): base64 keys separated
by commas or whitespace, the current one first."""


def parse_keys(text: str) -> list[str]:
    """Keys from a key file's text: one base64 key per line (the current key first); blank
    lines and lines starting with ``#`` are ignored. Also reads comma-separated keys."""
    keys: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keys.extend(part for part in line.replace(",", " ").split() if part)
    for key in keys:
        key_bytes(key)  # refuse a bad key now, with its reason
    return keys


def reader(keys: Sequence[str | bytes] | None) -> Chain | None:
    """A chain that opens what Compress and Encrypt(keys) sealed (None without keys), for
    reading tools: it shows plain rows and rows sealed before payloads were bound to their
    place too (it runs nothing; see docs/codecs.md)."""
    if not keys:
        return None
    return Chain([Compress(), Encrypt(list(keys), allow_unsealed=True, allow_unbound=True)])


def writer(keys: Sequence[str | bytes] | None) -> Chain | None:
    """A chain like a worker's, Compress and Encrypt(keys) with Encrypt's defaults (None
    without keys), for tools whose writes workers run: ``sagaway fork`` seals the payloads
    it copies again for the new run, and refuses what a worker would refuse."""
    if not keys:
        return None
    return Chain([Compress(), Encrypt(list(keys))])


def keys_from(path: str | os.PathLike[str] | None) -> list[str] | None:
    """Keys from ``path`` (a key file) or else ``$SAGAWAY_CODEC_KEYS``; None when neither."""
    if path is not None:
        return parse_keys(Path(path).read_text())
    env = os.environ.get(KEYS_ENV)
    return parse_keys(env) if env else None


__all__ = [
    "KEYS_ENV",
    "Chain",
    "Codec",
    "CodecStore",
    "Compress",
    "Encrypt",
    "FileStore",
    "Offload",
    "PayloadStore",
    "key_id",
    "keys_from",
    "parse_keys",
    "reader",
    "writer",
]
