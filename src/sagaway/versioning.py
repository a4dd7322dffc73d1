"""Deprecated: ``sagaway.patching`` (patches were named apart from code versions).

``sw.patched`` and ``sw.deprecate_patch`` are unchanged; only this module's name moved, so that
"version" means one thing in Sagaway: the code version of ``Manager(version=...)``.
"""

from __future__ import annotations

import warnings

from sagaway.patching import MAX_CHANGE_ID, deprecate_patch, patched

__all__ = ["MAX_CHANGE_ID", "deprecate_patch", "patched"]

warnings.warn(
    "sagaway.versioning is deprecated: import sagaway.patching (or use sw.patched and "
    "sw.deprecate_patch); patches are not code versions (Manager(version=...))",
    DeprecationWarning,
    stacklevel=2,
)
