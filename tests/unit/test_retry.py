from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sagaway as sw


def test_exponential_backoff_is_capped() -> None:
    policy = sw.RetryPolicy(initial_interval=1.0, backoff_coefficient=2.0, maximum_interval=30.0)
    assert [policy.interval(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_maximum_attempts() -> None:
    policy = sw.RetryPolicy(maximum_attempts=3)
    assert [policy.allows(n) for n in (1, 2, 3, 4)] == [True, True, True, False]
    assert sw.RetryPolicy(maximum_attempts=0).allows(10_000)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial_interval": -1},
        {"backoff_coefficient": 0.5},
        {"initial_interval": 10, "maximum_interval": 1},
        {"maximum_attempts": -1},
    ],
)
def test_invalid_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        sw.RetryPolicy(**kwargs)  # type: ignore[arg-type]


@given(st.floats(0, 100), st.floats(1, 10), st.floats(100, 1000), st.integers(1, 10_000))
def test_interval_never_exceeds_maximum_and_never_decreases(
    initial: float, coefficient: float, maximum: float, attempt: int
) -> None:
    policy = sw.RetryPolicy(
        initial_interval=initial, backoff_coefficient=coefficient, maximum_interval=maximum
    )
    assert 0 <= policy.interval(attempt) <= maximum
    assert policy.interval(attempt) <= policy.interval(attempt + 1)
