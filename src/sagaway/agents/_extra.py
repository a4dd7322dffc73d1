"""The extra this package needs, checked once: ``import sagaway.agents`` without Pydantic AI
installed fails with one line that says what to install."""

from __future__ import annotations

try:
    import pydantic_ai  # noqa: F401 - imported to see whether it is there
except ImportError as _missing:  # an optional extra
    raise ImportError(
        "sagaway.agents needs Pydantic AI: pip install 'sagaway[agents]'"
    ) from _missing
