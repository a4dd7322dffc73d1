"""Retry policies and their backoff arithmetic (pure, no I/O)."""

from __future__ import annotations

import dataclasses
import functools


@dataclasses.dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How an activity is retried after a ``RetryableError``.

    ``RetryPolicy()`` (what an activity registered without ``retry=`` gets) makes 3 attempts in
    all: the first, a retry 1 s after it fails, another 2 s after that (intervals grow by
    ``backoff_coefficient`` up to ``maximum_interval``). When the attempts are used up the
    workflow is SUSPENDED with ``RetriesExhausted`` (an incompletable error); the Recovery Worker
    runs it again later and the activity gets a fresh round of attempts, numbered on from the
    last (``sw.activity_info().attempt``). A compensation ignores ``maximum_attempts``: it is
    retried, with these intervals, until it succeeds. ``CompletableError`` is never retried;
    any other exception suspends the workflow at once. ``sagaway show KEY`` lists the error of
    each failed attempt.

    Example::

        @manager.register_activity(retry=sw.RetryPolicy(initial_interval=0.5, maximum_attempts=5))
        async def charge(order: Order) -> Charge: ...
    """

    initial_interval: float = 1.0
    """Seconds before the first retry."""
    backoff_coefficient: float = 2.0
    """Each interval is the previous one times this."""
    maximum_interval: float = 100.0
    """Upper bound of any interval, in seconds."""
    maximum_attempts: int = 3
    """Attempts in all, the first included; 0 means unlimited."""

    def __post_init__(self) -> None:
        if self.initial_interval < 0:
            raise ValueError("RetryPolicy.initial_interval must be >= 0")
        if self.backoff_coefficient < 1:
            raise ValueError("RetryPolicy.backoff_coefficient must be >= 1")
        if self.maximum_interval < self.initial_interval:
            raise ValueError("RetryPolicy.maximum_interval must be >= initial_interval")
        if self.maximum_attempts < 0:
            raise ValueError("RetryPolicy.maximum_attempts must be >= 0 (0 = unlimited)")

    def interval(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        exponent = max(attempt - 1, 0)
        # Cap the exponent so huge attempt counts cannot overflow the float.
        raw = self.initial_interval * self.backoff_coefficient ** min(exponent, 64)
        return min(raw, self.maximum_interval)

    def allows(self, attempt: int) -> bool:
        """Whether attempt number ``attempt`` (1-based) may run."""
        return self.maximum_attempts == 0 or attempt <= self.maximum_attempts

    @functools.cached_property
    def until_success(self) -> RetryPolicy:
        """This policy with no limit on attempts: what a compensation is retried by. Made once
        per policy (``dataclasses.replace`` runs ``__init__`` and its checks), not per call."""
        return dataclasses.replace(self, maximum_attempts=0)


DEFAULT = RetryPolicy()
"""Policy of activities registered without one."""
