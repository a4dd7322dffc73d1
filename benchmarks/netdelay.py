"""A TCP forwarder that can hold every chunk for a fixed one-way delay (``benchmarks.network``).

``python -m benchmarks.netdelay --listen HOST:PORT --to HOST:PORT --delay-ms D``: each accepted
connection is relayed to ``--to``; every chunk read from either side is written to the other
side ``D`` ms after it was read (order kept), so a request and its reply each wait ``D`` ms: a
round-trip of ``2 D``. With ``D = 0`` it relays at once. ``TCP_NODELAY`` on both sockets. Prints
``LISTENING`` once it accepts; stops on SIGTERM.

It is the delay where the kernel has no ``sch_netem`` (``tc ... netem`` then fails with
"Specified qdisc kind is unknown"). Threads, not an event loop: ``time.sleep`` waits to within
tens of microseconds, where asyncio's epoll timeouts are whole milliseconds (a 0.5 ms delay
became 1.3 ms). Per connection and direction a reader thread stamps each chunk and a writer
thread sends it when due. Under load a delay is a little longer than ``D``: the benchmark
measures the real round trip (``SELECT 1``) and reports it beside the nominal one.
"""

from __future__ import annotations

import argparse
import contextlib
import queue
import signal
import socket
import sys
import threading
import time
from types import FrameType


def _pipe(src: socket.socket, dst: socket.socket, delay: float) -> None:
    """Relay src -> dst, each chunk ``delay`` seconds after it was read; EOF passed on."""
    chunks: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()

    def send_when_due() -> None:
        try:
            while True:
                due, data = chunks.get()
                if not data:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send_when_due, daemon=True) if delay > 0 else None
    if sender is not None:
        sender.start()
    try:
        while data := src.recv(65536):
            if sender is not None:
                chunks.put((time.monotonic() + delay, data))
            else:
                dst.sendall(data)
    except OSError:
        pass
    if sender is not None:
        chunks.put((0.0, b""))
        sender.join()
    else:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _relay(client: socket.socket, target: tuple[str, int], delay: float) -> None:
    try:
        server = socket.create_connection(target)
    except OSError:
        client.close()
        return
    for sock in (client, server):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    back = threading.Thread(target=_pipe, args=(server, client, delay), daemon=True)
    back.start()
    _pipe(client, server, delay)
    back.join()
    client.close()
    server.close()


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def _stop(signum: int, frame: FrameType | None) -> None:
    sys.exit(0)


def relay_forever(server: socket.socket, target: tuple[str, int], delay_ms: float) -> None:
    """Accept on ``server`` (bound, listening) and relay each connection to ``target``; returns
    once ``server`` is closed."""
    delay = delay_ms / 1000
    while True:
        try:
            client, _ = server.accept()
        except OSError:
            return
        threading.Thread(target=_relay, args=(client, target, delay), daemon=True).start()


def serve(listen: tuple[str, int], target: tuple[str, int], delay_ms: float) -> None:
    signal.signal(signal.SIGTERM, _stop)
    with socket.create_server(listen, backlog=256) as server:
        print("LISTENING", flush=True)
        relay_forever(server, target, delay_ms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", required=True, help="HOST:PORT to accept on")
    parser.add_argument("--to", required=True, help="HOST:PORT to relay to")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay per chunk")
    args = parser.parse_args()
    serve(_addr(args.listen), _addr(args.to), args.delay_ms)


if __name__ == "__main__":
    main()
