"""Checks that a workflow key or a name can be stored as text by every database.

PostgreSQL refuses NUL in text with a raw DataError (SQLite stores it), and neither can store a
lone surrogate: these checks say so before anything is written.
"""

from __future__ import annotations


def check_text(value: str, what: str) -> None:
    """Refuse a key or name that a database cannot store as text (``ValueError``)."""
    if "\x00" in value:
        raise ValueError(f"{what} must not contain NUL characters (\\x00): {value!r}")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise ValueError(
                f"{what} must be valid Unicode (no lone surrogates such as '\\ud800'): {value!r}"
            ) from None


def check_key(key: str, what: str) -> None:
    """Refuse a workflow key that is empty, too long or not storable (``ValueError``)."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"{what} must be a non-empty string")
    if len(key) > 512:
        raise ValueError(f"{what} must be at most 512 characters")
    check_text(key, what)
