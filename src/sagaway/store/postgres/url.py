"""The URL of a PostgreSQL store: what goes to libpq, and Sagaway's own parameters.

``postgresql://user:password@host:5432/db?schema=sagaway&pool_size=10`` plus any libpq
parameter. Sagaway's own parameters, not passed to libpq: ``schema`` (default ``sagaway``),
``pool_size`` (default 10), and the ``Timing`` parameters ``pool_timeout`` (default 30),
``reconnect_delay`` (default 2), ``probe_interval`` (default 30) and ``probe_timeout``
(default 5), in seconds; ``pooler`` and ``listen_url`` (``Pooling``).
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class Pooling:
    """Whether a connection pooler in transaction mode (PgBouncer's ``pool_mode =
    transaction``) stands between the store and the server, and where notices come from.

    ``?pooler=transaction``: no statement is prepared on the server (its name could reach
    another server connection, or another client's statement), and LISTEN is not sent through
    the pooler (it would hold notices for whichever client has that server connection next):
    notices come from ``listen_url``, a direct connection to the server, or, without one, the
    engine polls. ``pooler=none`` (the default): a direct connection, or a pooler in session
    mode, which keeps one server connection per client connection.
    """

    transaction: bool = False
    """``pooler=transaction``."""
    listen_conninfo: str | None = None
    """``listen_url``: a direct PostgreSQL URL for the notification connections (a libpq
    URL, percent-encoded as a parameter); None: the store's own URL (without a pooler)."""


_POOLER_MODES = ("none", "session", "transaction")
_SECONDS_PARAMS = tuple(field.name for field in dataclasses.fields(Timing))
_OWN_PARAMS = frozenset({"schema", "pool_size", "pooler", "listen_url", *_SECONDS_PARAMS})


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


def parse_pooling(url: str) -> Pooling:
    """The ``Pooling`` parameters of a Sagaway PostgreSQL URL (``ValueError`` for a ``pooler``
    it does not know, or a ``listen_url`` that is not a PostgreSQL URL)."""
    mode, listen = "none", None
    for part in filter(None, urllib.parse.urlsplit(url).query.split("&")):
        name = _param_name(part)
        value = urllib.parse.unquote_plus(part.partition("=")[2])
        if name == "pooler":
            mode = value.lower()
            if mode not in _POOLER_MODES:
                raise ValueError(f"pooler must be one of {', '.join(_POOLER_MODES)}, not {value!r}")
        elif name == "listen_url":
            scheme = urllib.parse.urlsplit(value).scheme.lower()
            if scheme not in ("postgresql", "postgres"):
                raise ValueError("listen_url must be a PostgreSQL URL (percent-encoded)")
            listen = value
    return Pooling(transaction=mode == "transaction", listen_conninfo=listen)


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
    hidden = ("password", "listen_url")  # the second may hold a password of its own
    shown = [p for p in filter(None, parts.query.split("&")) if _param_name(p) not in hidden]
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
