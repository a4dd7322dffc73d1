"""Checks that a workflow key or a name can be stored as text by every database and printed
safely (``sagaway.identifiers``, re-exported for the engine's modules).

PostgreSQL refuses NUL in text with a raw DataError (SQLite stores it), and neither can store a
lone surrogate: these checks say so before anything is written.
"""

from __future__ import annotations

from sagaway.identifiers import check_key, check_name, check_plain, check_text

__all__ = ["check_key", "check_name", "check_plain", "check_text"]
