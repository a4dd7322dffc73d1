"""The PostgreSQL URL's pooler parameters, and the statements that name their schema
(``sagaway.store.postgres.qualify``): no server needed."""

from __future__ import annotations

import re
import urllib.parse

import pytest

from sagaway.store.postgres.qualify import Qualifier, table_names
from sagaway.store.postgres.url import parse_pooling, parse_postgres_url
from sagaway.store.sql import queries


def test_pooler_and_listen_url_are_sagaways_own() -> None:
    direct = urllib.parse.quote("postgresql://u:secret@db:5432/app?sslmode=require", safe="")
    url = f"postgresql://u@bouncer:6432/app?pooler=transaction&listen_url={direct}&schema=s"
    conninfo, schema, _, display = parse_postgres_url(url)
    assert conninfo == "postgresql://u@bouncer:6432/app"  # nothing of ours goes to libpq
    assert schema == "s"
    assert "secret" not in display and "listen_url" not in display
    pooling = parse_pooling(url)
    assert pooling.transaction
    assert pooling.listen_conninfo == "postgresql://u:secret@db:5432/app?sslmode=require"


def test_without_a_pooler_nothing_changes() -> None:
    pooling = parse_pooling("postgresql://u@db/app")
    assert not pooling.transaction and pooling.listen_conninfo is None
    assert not parse_pooling("postgresql://u@db/app?pooler=session").transaction


@pytest.mark.parametrize(
    "query", ["pooler=statement", "pooler=", "listen_url=http%3A%2F%2Fx", "listen_url=db"]
)
def test_bad_pooler_parameters_are_refused(query: str) -> None:
    with pytest.raises(ValueError):
        parse_pooling(f"postgresql://u@db/app?{query}")


def test_the_tables_come_from_the_migrations() -> None:
    known = {"workflows", "steps", "signals", "schema_migrations", "audit_log", "schedules"}
    assert known <= table_names()  # schedules: created in a fragment a migration uses


def test_tables_are_qualified_and_columns_left_alone() -> None:
    qualify = Qualifier("my_schema")
    text = (
        "UPDATE workflows SET x = 1 FROM steps s JOIN signals g ON TRUE "
        "WHERE o.k = workflows.k AND EXISTS (SELECT 1 FROM workflows c) "
        "AND extract(epoch FROM clock_timestamp()) > 0"
    )
    assert qualify(text) == (
        'UPDATE "my_schema".workflows SET x = 1 FROM "my_schema".steps s '
        'JOIN "my_schema".signals g ON TRUE WHERE o.k = workflows.k '
        'AND EXISTS (SELECT 1 FROM "my_schema".workflows c) '
        "AND extract(epoch FROM clock_timestamp()) > 0"
    )
    assert qualify(text) is qualify(text)  # rewritten once
    assert Qualifier('we"ird').rewrite("DELETE FROM steps") == 'DELETE FROM "we""ird".steps'


def test_every_named_query_names_its_tables_qualified() -> None:
    """After the rewrite no Sagaway table is named bare after FROM, JOIN, INTO or UPDATE; and no
    common table expression shares a table's name (the rewrite would point it at the table)."""
    qualify = Qualifier("s")
    tables = "|".join(table_names())
    bare = re.compile(rf"\b(FROM|JOIN|INTO|UPDATE)\s+({tables})\b", re.IGNORECASE)
    cte = re.compile(rf"\b({tables})\s+AS\s*\(", re.IGNORECASE)
    for name, text in queries("postgres").items():
        if name == "create_schema_migrations":
            continue  # run in the migration's transaction, with its path set
        assert not bare.search(qualify(text)), name
        assert not cte.search(text), name


def test_a_missing_pgbouncer_fails_under_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests import pgbouncer

    monkeypatch.setattr(pgbouncer, "_binary", lambda: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        pgbouncer.require_pgbouncer()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        pgbouncer.require_pgbouncer()
