"""The URL of an Engine Server and how to reach it: address, TLS files, token, call deadline.

``grpc://host:port`` (plain) or ``grpcs://host:port`` (TLS). Parameters:
``ca`` (PEM file of the CA that signed the server's certificate; default: the system's roots),
``cert`` and ``key`` (PEM files of this client's certificate, for mutual TLS), ``timeout``
(seconds each call may take, default 10), ``server_name`` (the name the server's certificate
must carry, when it differs from the host). The token comes from the ``token=`` argument of
``Manager``, else ``SAGAWAY_TOKEN``; it is never read from the URL, which gets printed.
"""

from __future__ import annotations

import dataclasses
import os
import urllib.parse
from pathlib import Path

from sagaway.store._url import positive_seconds

DEFAULT_CALL_TIMEOUT = 10.0
CHANNEL_KEEPALIVE_MS = 10_000
"""A client pings an idle connection this often, to find a dead server within seconds."""
CONNECT_TIMEOUT = 5.0
"""Seconds ``open()`` waits for the server before it says the server cannot be reached."""
_PARAMS = frozenset({"ca", "cert", "key", "timeout", "server_name"})


@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    """Where the Engine Server is and how to talk to it."""

    address: str
    """host:port, as gRPC takes it."""
    tls: bool
    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None
    server_name: str | None = None
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    token: str | None = None


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read the {what} file {path!r}: {exc.strerror or exc}") from None


def parse_target(url: str, token: str | None = None) -> Target:
    """The ``Target`` of a ``grpc://`` or ``grpcs://`` URL (ValueError says what is wrong)."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("grpc", "grpcs"):
        raise ValueError(f"not an Engine Server URL: {url!r} (use grpc://host:port)")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None or parts.path not in ("", "/"):
        raise ValueError(f"an Engine Server URL is grpc://HOST:PORT (or grpcs://), not {url!r}")
    if parts.username or parts.password:
        raise ValueError(
            "an Engine Server URL carries no credentials: pass token=... to the Manager or set "
            "SAGAWAY_TOKEN"
        )
    params = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(params) - _PARAMS)
    if unknown:
        raise ValueError(
            f"unknown Engine Server URL parameter(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(_PARAMS))}"
        )
    tls = scheme == "grpcs"
    if not tls and {"ca", "cert", "key"} & set(params):
        raise ValueError("ca, cert and key are TLS parameters: use grpcs://")
    if ("cert" in params) != ("key" in params):
        raise ValueError("mutual TLS needs both cert= and key=")
    host = parts.hostname
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return Target(
        address=address,
        tls=tls,
        ca=_read(params["ca"], "CA certificate") if "ca" in params else None,
        cert=_read(params["cert"], "client certificate") if "cert" in params else None,
        key=_read(params["key"], "client key") if "key" in params else None,
        server_name=params.get("server_name") or None,
        call_timeout=positive_seconds("timeout", params["timeout"])
        if "timeout" in params
        else DEFAULT_CALL_TIMEOUT,
        token=token or os.environ.get("SAGAWAY_TOKEN") or None,
    )


def handshake_hint(target: Target, details: str) -> str | None:
    """What a failed first call most likely means, when the connection broke during TLS setup:
    the server refused the handshake (no or unaccepted client certificate, TLS on one side
    only) or this client does not trust the server's certificate. None: no such sign."""
    where = f"the Engine Server at {target.address}"
    if "CERTIFICATE_VERIFY_FAILED" in details or "certificate verify failed" in details:
        return (
            f"this client does not trust the certificate of {where} (the TLS handshake failed): "
            "give ca=PATH of the CA that signed it"
        )
    if "Socket closed" not in details and "handshake" not in details.lower():
        return None
    if "tcp handshaker" in details:
        return None  # the TCP connect itself (a slow or busy server), not TLS
    if not target.tls:
        return f"{where} closed the connection: it may expect TLS (use grpcs://)"
    if target.cert is None:
        return (
            f"{where} refused the TLS handshake: it requires a client certificate "
            "(mutual TLS; give cert=PATH&key=PATH of a certificate signed by its client CA)"
        )
    return (
        f"{where} refused the TLS handshake: it did not accept this client certificate "
        "(not signed by the CA the server trusts, or expired)"
    )
