"""Benchmarks of Sagaway on the order-saga workload (defined in ``benchmarks/WORKLOAD.md``).

Run everything with ``python -m benchmarks.run`` from the repository root.
"""

from __future__ import annotations
