"""The URL of a PostgreSQL store: what goes to libpq, and Sagaway's own parameters.

``postgresql://user:password@host:5432/db?schema=sagaway&pool_size=10`` plus any libpq
parameter. Sagaway's own parameters, not passed to libpq: ``schema`` (default ``sagaway``),
``pool_size`` (default 10), and the ``Timing`` parameters ``pool_timeout`` (default 30),
``reconnect_delay`` (default 2), ``probe_interval`` (default 30) and ``probe_timeout``
(default 5), in seconds.
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse

from sagaway.store._url import positive_seconds

DEFAULT_SCHEMA = "sagaway"
DEFAULT_POOL_SIZE = 10
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Timing:
    """How long the store waits for the server, and how often it looks (URL parameters)."""

    pool_timeout: float = 30.0
    """Seconds a statement waits for a pooled connection before ``StoreUnavailable`` (all
    connections busy, or the server unreachable)."""
    reconnect_delay: float = 2.0
    """Longest pause between reconnection attempts of the pool and of the listener."""
    probe_interval: float = 30.0
    """Seconds between probe notices on the listening connection (one unanswered probe:
    reconnect)."""
    probe_timeout: float = 5.0
    """Seconds a probe may take before the listening connection is taken for dead."""


_SECONDS_PARAMS = tuple(field.name for field in dataclasses.fields(Timing))
_OWN_PARAMS = frozenset({"schema", "pool_size", *_SECONDS_PARAMS})


def _param_name(part: str) -> str:
    return urllib.parse.unquote_plus(part.partition("=")[0])


def parse_timing(url: str, defaults: Timing | None = None) -> Timing:
    """The ``Timing`` parameters of a Sagaway PostgreSQL URL; ``defaults`` (else ``Timing()``)
    for those not given."""
    given: dict[str, float] = {}
    for part in filter(None, urllib.parse.urlsplit(url).query.split("&")):
        name = _param_name(part)
        if name not in _SECONDS_PARAMS:
            continue
        value = urllib.parse.unquote_plus(part.partition("=")[2])
        given[name] = positive_seconds(name, value)
    return dataclasses.replace(defaults or Timing(), **given)


def parse_postgres_url(url: str) -> tuple[str, str, int, str]:
    """Split a Sagaway PostgreSQL URL into (conninfo for libpq, schema, pool size, display URL).

    The display URL is the URL without its password (in the user info or as a parameter).
    See ``parse_timing`` for the other parameters of Sagaway's own.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() not in ("postgresql", "postgres"):
        raise ValueError(f"not a PostgreSQL URL: {url!r}")
    if parts.netloc.count("@") > 1:
        # libpq would split at the first '@' and name the password's tail as the host in its
        # error: say what is wrong without showing any of the URL.
        raise ValueError(
            "the PostgreSQL URL's user or password holds an unencoded '@': percent-encode it "
            "as %40 (the URL is not shown: it holds a password)"
        )
    schema = DEFAULT_SCHEMA
    pool_size = DEFAULT_POOL_SIZE
    libpq_params: list[str] = []  # kept as written: libpq decodes %XX itself
    for part in filter(None, parts.query.split("&")):
        name = _param_name(part)
        if name not in _OWN_PARAMS:
            libpq_params.append(part)
            continue
        value = urllib.parse.unquote_plus(part.partition("=")[2])
        if name == "schema":
            schema = value
        elif name == "pool_size":
            pool_size = _pool_size(value)
    if not _SCHEMA_NAME.fullmatch(schema):
        raise ValueError(
            f"invalid schema name {schema!r}: use letters, digits and _ "
            "(not starting with a digit, at most 63 characters)"
        )
    conninfo = urllib.parse.urlunsplit(parts._replace(query="&".join(libpq_params)))

    user_info, at, host = parts.netloc.rpartition("@")
    netloc = f"{user_info.partition(':')[0]}{at}{host}"
    shown = [p for p in filter(None, parts.query.split("&")) if _param_name(p) != "password"]
    display = urllib.parse.urlunsplit(parts._replace(netloc=netloc, query="&".join(shown)))
    return conninfo, schema, pool_size, display


def _pool_size(value: str) -> int:
    try:
        pool_size = int(value)
    except ValueError:
        pool_size = 0
    if pool_size < 1:
        raise ValueError(f"pool_size must be a positive integer, not {value!r}")
    return pool_size
