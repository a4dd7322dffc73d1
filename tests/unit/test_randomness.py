"""Identifiers and nonces cut from a batch of random bytes: never repeated, not even across a
fork."""

from __future__ import annotations

import os

from sagaway import randomness
from sagaway.randomness import RandomBytes


def test_values_never_repeat_across_refills() -> None:
    source = RandomBytes(batch=64)
    taken = [source.take(12) for _ in range(1000)]  # ~190 refills
    assert len(set(taken)) == len(taken) and {len(t) for t in taken} == {12}


def test_a_request_larger_than_a_batch_is_served_whole() -> None:
    source = RandomBytes(batch=8)
    assert len(source.take(100)) == 100
    assert len(source.take(3)) == 3


def test_new_ids_look_like_uuid4_hex_and_are_unique() -> None:
    ids = {randomness.new_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


def test_a_forked_child_draws_its_own_bytes() -> None:
    randomness.RANDOM.take(16)  # the parent holds a partly used buffer
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report the first bytes it is given
        os.write(write, randomness.RANDOM.take(16))
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 16) != randomness.RANDOM.take(16)  # not the parent's next ones


def test_run_ids_made_later_sort_later_and_never_repeat() -> None:
    ids = [randomness.new_run_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    # Same millisecond: same 12-digit prefix, random rest; across milliseconds, in order.
    assert [i[:12] for i in ids] == sorted(i[:12] for i in ids)
