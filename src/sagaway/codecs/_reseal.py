"""A fork's payloads re-sealed for its new run.

A fork copies its source's arguments and kept steps into a new run. Sealed payloads are bound
to their run (``_places``), so copies would not open there: the forking process opens each
with the source's place and seals it again with the fork's. The store writes the results in
the fork's own transaction (``ForkRequest.payloads`` of ``Store.fork_workflow``), so the fork
never exists holding its source's ciphertexts, even if the process dies mid-way.

The values of the events and stream items the kept publish steps wrote are bound to the source's
run too (``_places.output``): they go the same way (``output_payloads``).

A payload the forking process cannot open (a key or a codec it lacks, a payload copied in from
elsewhere) refuses the fork: copied unopened, it could never be opened in the new run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection

from sagaway import errors
from sagaway.codecs import _places
from sagaway.codecs._chain import Chain
from sagaway.codecs._places import Place
from sagaway.states import StepKind
from sagaway.store.records import (
    ForkPayloads,
    OutputPayload,
    OutputRecord,
    StepPayloads,
    StepRecord,
    WorkflowRecord,
)


def fork_payloads(
    chain: Chain,
    source: WorkflowRecord,
    steps: list[StepRecord],
    *,
    run_id: str,
    call_ids: Collection[str],
    given: ForkPayloads | None = None,
) -> ForkPayloads:
    """The payloads of a fork ``run_id`` of ``source`` that keeps the steps ``call_ids``
    (``steps``: the source's, as stored), or ``given`` (plain) sealed for the fork."""
    if given is not None:
        return _sealed_for(chain, given, steps, run_id)
    again = _again(chain, source)

    kept = set(call_ids)
    moved: list[StepPayloads] = []
    for step in steps:
        if step.call_id not in kept or (step.result is None and step.error is None):
            continue
        copy = dataclasses.replace(step, run_id=run_id)
        result = step.result
        # A child start's result is the child's key, in clear (see CodecStore).
        if result is not None and step.kind is not StepKind.CHILD:
            was, now = _places.step(step, "result"), _places.step(copy, "result")
            result = again(result, was, now, sealed=True)
        error = step.error
        if error is not None:
            was, now = _places.step(step, "error"), _places.step(copy, "error")
            error = again(error, was, now, sealed=False)
        moved.append(StepPayloads(step.call_id, result, error))
    args = again(source.args, args_place(chain, source), _places.run(run_id, "args"), sealed=True)
    return ForkPayloads(args=args, steps=tuple(moved))


def _again(chain: Chain, source: WorkflowRecord) -> Callable[..., str]:
    """``again(text, was, now, *, sealed)``: ``text`` of ``source`` opened at the place ``was``
    and sealed again at ``now`` (``PayloadError`` naming it if it cannot be opened here)."""

    def again(text: str, was: Place, now: Place, *, sealed: bool) -> str:
        try:
            opened = chain.open(text, place=was, sealed=sealed)
        except errors.PayloadError as exc:
            why = (
                f"cannot fork workflow {source.key!r}: {_places.describe(was)} cannot be opened "
                f"here, so it cannot be sealed again for the fork: {exc}"
            )
            if isinstance(exc, errors.PayloadKeyError):
                raise errors.PayloadKeyError(why, exc.key_id) from None
            raise errors.PayloadError(why) from None
        return chain.seal(opened, place=now)

    return again


def output_payloads(
    chain: Chain,
    source: WorkflowRecord,
    outputs: list[OutputRecord],
    *,
    run_id: str,
    call_ids: Collection[str],
    given: ForkPayloads | None = None,
) -> tuple[OutputPayload, ...]:
    """The values of the events and stream items among ``outputs`` (the source's, as stored)
    that the kept steps ``call_ids`` wrote, sealed again for the fork ``run_id``; those
    ``given`` (plain, each naming a source ``seq``) are sealed for it instead."""
    by_seq = {o.seq: o for o in outputs}
    plain = {} if given is None else {p.seq: p.value for p in given.outputs}
    unknown = sorted(set(plain) - set(by_seq))
    if unknown:
        raise ValueError(f"fork payloads name published values {unknown}, which have no record")
    again = _again(chain, source)
    kept = set(call_ids)
    sealed: list[OutputPayload] = []
    for o in outputs:
        now = _places.output(run_id, o.kind, o.name)
        if o.seq in plain:
            sealed.append(OutputPayload(o.seq, chain.seal(plain[o.seq], place=now)))
        elif o.call_id is not None and o.call_id in kept:
            was = _places.output(source.run_id, o.kind, o.name)
            sealed.append(OutputPayload(o.seq, again(o.value, was, now, sealed=True)))
    return tuple(sealed)


def _sealed_for(
    chain: Chain, given: ForkPayloads, steps: list[StepRecord], run_id: str
) -> ForkPayloads:
    """Plain payloads of a fork sealed for its run ``run_id`` (the steps' kinds are the
    source's: a received signal's result opens as the signal)."""
    by_id = {s.call_id: dataclasses.replace(s, run_id=run_id) for s in steps}
    sealed: list[StepPayloads] = []
    for payload in given.steps:
        step = by_id.get(payload.call_id)
        if step is None:
            raise ValueError(f"fork payloads name step {payload.call_id!r}, which has no record")
        result = payload.result
        if result is not None and step.kind is not StepKind.CHILD:
            result = chain.seal(result, place=_places.step(step, "result"))
        error = payload.error
        if error is not None:
            error = chain.seal(error, place=_places.step(step, "error"))
        sealed.append(StepPayloads(payload.call_id, result, error))
    args = chain.seal(given.args, place=_places.run(run_id, "args"))
    return ForkPayloads(args=args, steps=tuple(sealed))


def args_place(chain: Chain, record: WorkflowRecord) -> Place:
    """The place ``record``'s arguments open at (``_places.args_places``: a debounced run's
    burst, else the run); the run's when none does, so the refusal names the run."""
    return _opened_args(chain, record)[0]


def opened_args(chain: Chain, record: WorkflowRecord) -> str:
    """``record``'s arguments opened where they were sealed (as ``args_place`` finds it),
    opened once; or, as ``Chain.try_open`` gives them, with why they could not be."""
    place, text = _opened_args(chain, record)
    if text is not None:
        return text
    return chain.try_open(record.args, place=place, sealed=True) or ""


def _opened_args(chain: Chain, record: WorkflowRecord) -> tuple[Place, str | None]:
    """The place ``args_place`` gives, and the arguments if a burst's place opened them."""
    *others, own = _places.args_places(record.run_id, record.name, record.debounce_key)
    for place in others:
        try:
            return place, chain.open(record.args, place=place, sealed=True)
        except errors.PayloadError:
            continue
    return own, None
