"""The named queries' shared fragments: a ``-- use: <name>`` line stands for that query."""

from __future__ import annotations

import pytest

from sagaway.store.sql import queries


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_the_purge_and_its_count_use_one_condition(dialect: str) -> None:
    q = queries(dialect)
    purgeable = q["purgeable"]
    assert "json_quote(w.key)" in purgeable or "to_json(w.key)" in purgeable
    purge = q["purge_select" if dialect == "sqlite" else "purge_ended"]
    assert purgeable in purge
    assert purgeable in q["count_purgeable"]
    assert not any("-- use:" in text for text in q.values())


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_no_query_keeps_a_comment_line(dialect: str) -> None:
    for name, text in queries(dialect).items():
        assert not any(line.lstrip().startswith("--") for line in text.splitlines()), name


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_a_fragment_is_in_the_queries_that_use_it_and_is_no_query(dialect: str) -> None:
    q = queries(dialect)
    assert "due_filter" not in q
    claim = q["due_candidates" if dialect == "sqlite" else "claim_due"]
    for text in (claim, q["next_due"]):
        assert "any_queue" in text and "unversioned" in text and "concurrency_limit" in text
    if dialect == "postgres":
        assert "finish_update" not in q
        ending = "SET status = %(status)s, result = %(result)s"
        assert ending in q["finish_owned"] and ending in q["finish_owned_with_step"]


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_the_shared_fragments_are_read_by_both_dialects(dialect: str) -> None:
    q = queries(dialect)
    assert "workflow_columns" not in q and "inserted_columns" not in q
    for name in ("get_current", "get_run", "signal_target"):
        assert "fairness_weight, fair_pass" in q[name], name
    assert "debounce_until, priority" in q["insert_workflow"]


def test_postgres_next_due_tests_key_limits_and_lines_in_its_pending_part_only() -> None:
    # The server plans every subquery written, on each call: the per-key subqueries belong
    # where a start can be, and made most of the statement's cost in the other three parts.
    parts = queries("postgres")["next_due"].split("UNION ALL")
    assert len(parts) == 4
    assert "status = 'PENDING'" in parts[0]
    assert "concurrency_limit" in parts[0] and "ordering_seq" in parts[0]
    for part in parts[1:]:
        assert "status = 'PENDING'" not in part
        assert "concurrency_limit" not in part and "ordering_seq" not in part
        assert "any_queue" in part and "unversioned" in part and "paused_at IS NULL" in part


def test_postgres_claim_tests_key_limits_and_lines_on_starts_only() -> None:
    claim = queries("postgres")["claim_due"]
    started, rest = claim.split("), waiting AS (")
    pending = rest.split("), due AS (")[0]
    assert "concurrency_limit" not in started and "ordering_seq" not in started
    assert "any_queue" in started and "paused_at IS NULL" in started
    assert "concurrency_limit" in pending and "ordering_seq" in pending


def test_sqlite_next_due_tests_key_limits_and_lines_in_its_pending_parts_only() -> None:
    # The per-key subqueries cost VM steps on every row read, where a start cannot be too.
    parts = queries("sqlite")["next_due"].split("UNION ALL")
    assert len(parts) == 6
    for part in parts[:2]:
        assert "status = 'PENDING'" in part
        assert "concurrency_limit" in part and "ordering_seq" in part
    for part in parts[2:]:
        assert "status = 'PENDING'" not in part
        assert "concurrency_limit" not in part and "ordering_seq" not in part
        assert "any_queue" in part and "unversioned" in part and "paused_at IS NULL" in part


def test_sqlite_claim_tests_key_limits_and_lines_on_starts_only() -> None:
    # (Both parts select the concurrency_limit column: the test is the comparison with it.)
    started, pending = queries("sqlite")["due_candidates"].split("UNION ALL")
    assert "< concurrency_limit" not in started and "ordering_seq" not in started
    assert "any_queue" in started and "paused_at IS NULL" in started
    assert "< concurrency_limit" in pending and "ordering_seq" in pending
