"""Debounced bursts, shared per-key lines and priorities of top-level starts
(``settings.debounced_starts``, ``settings.shared_lines``, ``settings.prioritised_starts``), and
their checks.

All three are drawn from the scenario's programs (a hash of their JSON), not from hypothesis's
stream, so scenarios found before they existed replay as before with them off, and draw the
same programs with them on.

- **Debounce**: some top-level starts are a burst: one or two starts with a decoy program (same
  label, one ``sw.patched`` step of its own), then the start with the real program, each under
  an idempotency key of its own (the first under the workflow's key), all with one
  ``debounce_key``. The burst is one run, given the last start's arguments: every start must
  be handed that run, and the run must end as the model says for the real program (a run of a
  decoy's arguments returns ``patched:<label>.decoy``). The period (``DEBOUNCE``) is longer
  than the clock can move between two starts of a burst (four faults, each passing the lease).
- **Shared lines**: in half the scenarios with two top-level workflows and no deadline, both
  are started with one ``ordering_key``, and a restart (``TERMINATE_EXISTING``) joins the end
  of that line. The runs of a line run one at a time in start order: a run is expected
  PENDING while a run before it in the line has not ended (whatever the model says it would
  do once it runs; a settle does not stop while such a run ahead is due: ``ahead_due``), and no
  run is claimed before the run ahead of it has ended (``check``).
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from typing import TYPE_CHECKING, Any

import sagaway as sw
from tests.generative.program import Patch, Program, TopLevel, to_json

if TYPE_CHECKING:
    from tests.generative.driver import Driver
    from tests.generative.settings import GenSettings

DEBOUNCE = 3000.0
"""Virtual seconds of a burst's quiet period: more than four faults can move the clock while
its starts are made (a crash or a stall passes the lease, 600 s, each time)."""
SHARED_LINE = "line/shared"
ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TERMINATED"})


def _hash(*programs: Program) -> int:
    text = json.dumps([to_json(p) for p in programs], sort_keys=True)
    return zlib.crc32(text.encode())


def shared(driver: Driver) -> bool:
    """Whether this scenario's top-level workflows share one line."""
    tops = driver.scenario.workflows
    if not driver.settings.shared_lines or len(tops) < 2:
        return False
    if any(t.timeout is not None for t in tops):
        return False  # a deadline counts from the start: it would pass while the run waits
    return _hash(*(t.program for t in tops)) % 2 == 0


def decoys(settings: GenSettings, top: TopLevel) -> int:
    """How many decoy starts open this top-level workflow's burst (0: not debounced): one
    workflow in three, with one or two."""
    if not settings.debounced_starts or top.timeout is not None:
        return 0
    n = _hash(top.program) >> 4
    return 0 if n % 3 else 1 + n // 3 % 2


def decoy(program: Program) -> Program:
    """Arguments that must not run: the same label (the harness keys its record by it)."""
    return Program(program.label, "none", (Patch(f"{program.label}.decoy"),))


async def burst(
    driver: Driver, manager: sw.Manager, top: TopLevel, count: int, options: dict[str, Any]
) -> str:
    """Start ``top`` as a burst of ``count`` decoys and the real start; the run id. A retry
    after an injected error makes them all again: a start whose key joined already changes
    nothing."""
    run_ids = []
    for i in range(count + 1):
        program = decoy(top.program) if i < count else top.program
        handle = await manager.workflow("interp", to_json(program), top.key).execute(
            idempotency_key=top.key if i == 0 else f"{top.key}~{i}",
            debounce_key=f"burst/{top.key}",
            debounce=DEBOUNCE,
            **options,
        )
        run_ids.append(handle.run_id)
    if len(set(run_ids)) != 1:
        driver.problems.append(f"the debounced starts of {top.key} were given runs {run_ids}")
    driver.bursts += 1
    return run_ids[0]


def flow_of(settings: GenSettings, top: TopLevel) -> dict[str, Any]:
    """Priority and fairness options of a top-level start ({}: none), for one workflow in two:
    a priority from 1 to 5 and one of two tenants, ``t-b`` weighted 2."""
    if not settings.prioritised_starts:
        return {}
    n = _hash(top.program) >> 8  # not the bits ``decoys`` reads
    if n % 2:
        return {}
    tenant = ("t-a", 1.0) if n // 2 % 3 else ("t-b", 2.0)
    return {"priority": 1 + n // 6 % 5, "fairness_key": tenant[0], "fairness_weight": tenant[1]}


def started_with(driver: Driver, run_id: str, flow: dict[str, Any]) -> None:
    """Record a top-level run started with priority and fairness options (``check``)."""
    if flow and run_id not in driver.flows:
        driver.flows[run_id] = flow


def joined(driver: Driver, key: str, run_id: str) -> None:
    """Record a run started in a line (in start order)."""
    line = driver.lines.setdefault(key, [])
    if run_id not in line:
        line.append(run_id)


def blocked(driver: Driver, run_id: str, records: dict[str, Any]) -> bool:
    """Whether a run of the line has one before it that has not ended (it must wait)."""
    for line in driver.lines.values():
        if run_id in line:
            ahead = line[: line.index(run_id)]
            return any(r in records and records[r].status.value not in ENDED for r in ahead)
    return False


def ahead_due(driver: Driver, run_id: str, records: dict[str, Any], now: float) -> bool:
    """Whether a run ahead of ``run_id`` in its line has not ended and is due now (a WAITING
    or SUSPENDED run woken: a process is about to claim it). It may then end, and ``run_id``
    run: the PENDING that ``blocked`` expects of ``run_id`` need not last, so a settle must not
    stop at such a moment (a child's end woke its parent ahead in the line, which ended
    CANCELLED just after a settle had stopped: its run behind it, expected PENDING while the
    settle looked, was found PENDING where the model says SUSPENDED)."""
    for line in driver.lines.values():
        if run_id in line:
            for earlier in line[: line.index(run_id)]:
                record = records.get(earlier)
                if (
                    record is not None
                    and record.status.value in ("WAITING", "SUSPENDED")
                    and record.next_run_at is not None
                    and record.next_run_at <= now
                ):
                    return True
    return False


def check(driver: Driver, records: dict[str, Any]) -> list[str]:
    """No run of a line is claimed before every run ahead of it ended: a claim that returned
    before the end of a run ahead of it was even asked for (store call ticks) ran them
    together or out of order. Every run started with a priority records the priority and
    fairness key and weight its start asked for (a run a purge deleted is not read)."""
    world = driver.world
    out = []
    for run_id, flow in driver.flows.items():
        record = records.get(run_id)
        got = None if record is None else {k: getattr(record, k) for k in flow}
        if got is not None and got != flow:
            out.append(f"run {run_id[-8:]} was started with {flow}, it records {got}")
    for key, line in driver.lines.items():
        for i, later in enumerate(line):
            claimed = world.claimed.get(later)
            if claimed is None:
                continue
            for earlier in line[:i]:
                ended = world.ending.get(earlier)
                if ended is None or claimed < ended:
                    out.append(
                        f"line {key}: run {later[-8:]} was claimed (tick {claimed}) before "
                        f"run {earlier[-8:]} ahead of it ended (tick {ended})"
                    )
    return out


def blocks(driver: Driver) -> Counter[str]:
    """Bursts started, runs of lines of more than one, runs started with a priority and a
    fairness key (the run's summary)."""
    longer = sum(len(line) for line in driver.lines.values() if len(line) > 1)
    return Counter(
        debounced_bursts=driver.bursts,
        runs_in_shared_lines=longer,
        prioritised_starts=len(driver.flows),
    )
