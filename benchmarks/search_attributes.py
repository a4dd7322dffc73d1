"""Filtered listings by search attributes at 100k and 1M workflows, on SQLite and PostgreSQL.

    python -m benchmarks.search_attributes [--sizes 100000,1000000] [--postgres URL]

Each size gets a fresh database filled by ``benchmarks.preload`` (ended workflows with their
steps), then three search attributes per workflow by SQL (the store's code is not used for the
rows: the point is the query on a large table): ``customer`` (text, 100,000 distinct values:
~10 workflows each at 1M), ``region`` (text, 5 values: 20 % each) and ``amount`` (number,
0..999.99). Then each listing below (a page of 50, newest first, through ``Store.list_page``,
the query ``Manager.list_workflows(where=...)`` and ``sagaway list --where`` run) is timed
``REPEAT`` times after a warm-up; the median and the worst are printed in milliseconds. Flat
means the 1M numbers are about the 100k ones.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from typing import Any

from benchmarks import preload
from sagaway.store import open_store
from sagaway.store.records import AttributeFilter, ListQuery

REPEAT = 20
F = AttributeFilter
QUERIES: dict[str, tuple[AttributeFilter, ...]] = {
    "customer=c4711 (~10 rows at 1M)": (F(name="customer", text="c4711"),),
    "region=eu (20 %)": (F(name="region", text="eu"),),
    "amount>=999 (0.1 %)": (F(name="amount", op=">=", number=999.0),),
    "customer=c4711 and region=eu": (
        F(name="customer", text="c4711"),
        F(name="region", text="eu"),
    ),
    "customer=4711 as text or number": (F(name="customer", text="4711", number=4711.0),),
}

_SQLITE_ATTRS = """
INSERT INTO search_attributes (run_id, name, kind, str_value, num_value, created_at)
SELECT run_id, 'customer', 'str', 'c' || (CAST(substr(key, -8) AS INTEGER) % 100000), NULL,
       created_at FROM workflows
UNION ALL
SELECT run_id, 'region', 'str',
       CASE CAST(substr(key, -8) AS INTEGER) % 5 WHEN 0 THEN 'eu' WHEN 1 THEN 'us'
            WHEN 2 THEN 'apac' WHEN 3 THEN 'latam' ELSE 'africa' END, NULL, created_at
FROM workflows
UNION ALL
SELECT run_id, 'amount', 'float', NULL,
       (CAST(substr(key, -8) AS INTEGER) * 7919 % 100000) / 100.0, created_at FROM workflows
"""
_PG_ATTRS = """
INSERT INTO search_attributes (run_id, name, kind, str_value, num_value, created_at)
SELECT run_id, 'customer', 'str', 'c' || (right(key, 8)::bigint % 100000), NULL::float8,
       created_at FROM workflows
UNION ALL
SELECT run_id, 'region', 'str',
       (ARRAY['eu', 'us', 'apac', 'latam', 'africa'])[1 + right(key, 8)::bigint % 5], NULL,
       created_at FROM workflows
UNION ALL
SELECT run_id, 'amount', 'float', NULL, (right(key, 8)::bigint * 7919 % 100000) / 100.0::float8,
       created_at FROM workflows
"""


def add_attributes(url: str) -> None:
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(_SQLITE_ATTRS)
            conn.execute("COMMIT")
            conn.execute("ANALYZE")
        finally:
            conn.close()
        return
    import psycopg
    from psycopg import sql

    conn_url, schema = preload._pg_target(url)
    with psycopg.connect(conn_url, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute(_PG_ATTRS)
        conn.execute("VACUUM ANALYZE search_attributes")


async def time_queries(url: str) -> dict[str, dict[str, float]]:
    store = open_store(url)
    await store.open()
    out = {}
    try:
        for label, filters in QUERIES.items():
            query = ListQuery(limit=50, attributes=filters)
            rows = await store.list_page(query)  # warm-up
            samples = []
            for _ in range(REPEAT):
                began = time.perf_counter()
                await store.list_page(query)
                samples.append((time.perf_counter() - began) * 1000)
            out[label] = {
                "rows": len(rows),
                "median_ms": round(statistics.median(samples), 2),
                "max_ms": round(max(samples), 2),
            }
    finally:
        await store.close()
    return out


def fresh_url(backend: str, postgres: str, folder: str, n: int) -> str:
    if backend == "sqlite":
        return f"sqlite:///{folder}/attrs-{n}.db"
    return f"{postgres}{'&' if '?' in postgres else '?'}schema=bench_attrs_{uuid.uuid4().hex[:8]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("SAGAWAY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1/test"),
    )
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        for backend in args.backends.split(","):
            for n in (int(s) for s in args.sizes.split(",")):
                url = fresh_url(backend, args.postgres, folder, n)
                try:
                    began = time.perf_counter()
                    preload.preload(url, n)
                    add_attributes(url)
                    load_s = round(time.perf_counter() - began, 1)
                    timings = asyncio.run(time_queries(url))
                finally:
                    if backend == "postgres":
                        _drop(url)
                results.append({"backend": backend, "n": n, "load_s": load_s, **timings})
                print(json.dumps(results[-1]), flush=True)
    for r in results:
        print(f"\n{r['backend']} n={r['n']:,} (load {r['load_s']} s)")
        for label in QUERIES:
            t = r[label]
            median, worst = t["median_ms"], t["max_ms"]
            print(f"  {label:36} rows {t['rows']:3}  median {median:8.2f} ms  max {worst:8.2f} ms")


def _drop(url: str) -> None:
    import psycopg
    from psycopg import sql

    conn_url, schema = preload._pg_target(url)
    with psycopg.connect(conn_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


if __name__ == "__main__":
    main()
