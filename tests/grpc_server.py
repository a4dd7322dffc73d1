"""An Engine Server in a thread of the test process, for the ``grpc+…`` backends.

Starting one takes milliseconds (no new interpreter); each test gets its own, in front of its
own fresh database. Crash tests that kill the server run ``sagaway server`` as a process instead.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from sagaway.server.app import ServerConfig, serve


class ServerThread:
    """``sagaway server`` for ``url`` on a free port, until ``stop()``."""

    def __init__(self, url: str, **config: Any) -> None:
        self.config = ServerConfig(url=url, listen="127.0.0.1:0", **config)
        self.address = ""
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="sagaway-test-server", daemon=True)

    @property
    def url(self) -> str:
        scheme = "grpcs" if self.config.tls_cert else "grpc"
        return f"{scheme}://{self.address}"

    def start(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(30) or self._error is not None:
            raise RuntimeError(f"the test server did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()

            def ready(address: str) -> None:
                self.address = address
                self._ready.set()

            await serve(self.config, self._stop, ready=ready)

        try:
            asyncio.run(main())
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


SERVED: dict[str, str] = {}
"""The database behind each running test server, by the server's URL."""


def direct_url(url: str) -> str:
    """The database URL itself: ``url``, or the one behind the test server at ``url``."""
    return SERVED.get(url, url)
