"""The old import path of ``sagaway.toolkit.outbox``.

The transactional outbox: moved to the service-side toolkit; this module keeps code that imports
it from here working, with the same objects."""

from __future__ import annotations

from sagaway.toolkit.outbox import *  # noqa: F403  (the same names, listed there once)
from sagaway.toolkit.outbox import __all__ as __all__
