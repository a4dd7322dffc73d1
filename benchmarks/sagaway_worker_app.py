"""A Sagaway worker process of the 3-worker-process variant (PostgreSQL).

Run by the orchestrator as ``python -m sagaway worker benchmarks.sagaway_worker_app:manager``; the
engine URL and Manager settings come from ``$BENCH_SAGAWAY_CONFIG`` (JSON, the adapter config:
``url``, ``lease_timeout``, ``poll_interval``) and the service databases from
``$BENCH_SERVICES`` (JSON, a ``workload.Services`` spec). The client runs in the benchmark process
(``SagawayAdapter`` with ``client_only``: ``async with manager.connect():``).
"""

from __future__ import annotations

import json
import os

from benchmarks.sagaway_adapter import LEASE_TIMEOUT, ManagerSettings, build
from benchmarks.workload import Services

_config = json.loads(os.environ["BENCH_SAGAWAY_CONFIG"])
services = Services(json.loads(os.environ["BENCH_SERVICES"]))
settings = ManagerSettings(
    url=_config["url"],
    activities=_config.get("activities", "async"),
    lease_timeout=_config.get("lease_timeout", LEASE_TIMEOUT),
    poll_interval=_config.get("poll_interval"),
)
manager = settings.manager()
order_saga = build(manager, services, settings.activities)
