"""What a console is started with, and which listen addresses count as this machine only."""

from __future__ import annotations

import dataclasses
import ipaddress
from pathlib import Path

from sagaway import credentials

DEFAULT_LISTEN = "127.0.0.1:8080"


@dataclasses.dataclass(frozen=True, slots=True)
class ConsoleConfig:
    """How one console serves."""

    url: str
    """The database (or ``grpc://`` Engine Server) URL the console reads and acts on."""
    token: str | None = None
    """When set, every request must carry it or a token of ``tokens_file`` (bearer header, or
    the login cookie). It is the principal ``default``, with every role."""
    tokens_file: Path | None = None
    """Named tokens with roles (``sagaway.credentials``; the same file as the Engine Server's
    will do: its ``[[certificate]]`` entries do not apply here)."""
    read_only: bool = False
    """Hide the actions and refuse their requests (403)."""
    poll_interval: float = 2.0
    """Seconds between two refreshes of a page's live part in the browser."""
    session_idle: float = 12 * 3600.0
    """Seconds a login session lasts without a request (then the browser logs in again)."""
    session_lifetime: float = 7 * 86400.0
    """Seconds a login session lasts at most, however much it is used."""
    codec_keys: tuple[str, ...] = ()
    """Keys that open encrypted payloads for display (``sagaway.codecs``; the current one
    first); without them encrypted payloads are shown as «encrypted»."""

    def load_credentials(self) -> credentials.Credentials | None:
        """Who may log in, read now (None: no token is asked for); ``TokensFileError``."""
        return credentials.combine(
            credentials.load(self.tokens_file) if self.tokens_file else None, self.token
        )


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6) as host and port; ValueError when malformed."""
    host, sep, port_text = listen.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ValueError(f"--listen must be HOST:PORT, e.g. {DEFAULT_LISTEN}, not {listen!r}")
    port = int(port_text)
    if port > 65535:
        raise ValueError(f"--listen: port {port} is out of range (0-65535)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def is_loopback(host: str) -> bool:
    """Whether ``host`` reaches this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything
