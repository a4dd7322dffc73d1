"""benchmarks.network (PostgreSQL behind a round-trip delay) and its forwarder."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from typing import Any

import pytest
from benchmarks import netdelay, network


def _spec(engine: str) -> dict[str, Any]:
    return {
        "engine": engine,
        "engine_config": {"url": "postgresql://postgres@127.0.0.1:5432/bench?schema=bench_x"},
        "services": {"kind": "postgres", "url": "postgresql://postgres@127.0.0.1:5432/bench"},
    }


def test_the_scenario_reaches_postgresql_through_the_veth_address_with_a_pool_of_5() -> None:
    path = network.NetPath("forwarder")  # nothing is made before __enter__
    spec = _spec("sagaway")
    routed = path.spec(spec)
    host = f"postgres@{path.host_ip}:5432"
    assert routed["engine_config"]["url"] == (
        f"postgresql://{host}/bench?schema=bench_x&pool_size={network.POOL}"
    )
    assert routed["services"]["url"] == f"postgresql://{host}/bench"
    assert spec == _spec("sagaway")  # the orchestrator's own spec is left alone
    assert "pool_size" not in path.spec(_spec("checkpoint"))["engine_config"]["url"]
    assert path.command(["python", "-m", "x"]) == [
        "ip",
        "netns",
        "exec",
        path.ns,
        "python",
        "-m",
        "x",
    ]


def _record(thr: float | None = None, p50: float | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {
        "wrong_results": 0,
        "errors": 0,
        "service_check": {"ok": True},
        "loadavg_start": [7.0, 6.0, 5.0],
        "n": 1,
        "warmup": 0,
        "measured_client_cpu_s": 0.002,
        "measured_cpu": {"per_wf_ms": 3.0},
        "external": [
            {"what": "forwarder (benchmarks.netdelay)", "cpu_s": 0.5},
            {"what": "postgresql cluster", "cpu_s": 9.0, "bench_backends_cpu_s": 0.003},
        ],
        "throughput_wf_s": thr or 1.0,
        "latency_ms": {"p50": p50 or 1.0},
    }
    return record


def test_the_curve_takes_medians_and_checks_the_goals_at_2_ms() -> None:
    runs = {
        "2": {
            "sagaway/postgres": {
                "A_thr": [_record(thr=100), _record(thr=300), _record(thr=200)],
                "A_seq": [_record(p50=12.0)],
            },
            "checkpoint/postgres": {"A_thr": [_record(thr=100)], "A_seq": [_record(p50=10.0)]},
        },
        "0": {
            "sagaway/postgres": {"A_thr": [_record(thr=50)], "A_seq": [_record(p50=1.0)]},
            "checkpoint/postgres": {"A_thr": [_record(thr=100)], "A_seq": [_record(p50=1.0)]},
        },
    }
    probes = {"2": [{"select1_p50_ms": 2.3}], "0": [{"select1_p50_ms": 0.1}]}
    rows = network.summarize(runs, probes)
    assert [r["rtt_ms"] for r in rows] == [0.0, 2.0]
    two = rows[1]
    assert two["sagaway_A_thr"] == 200
    assert two["thr_ratio"] == pytest.approx(2.0)
    assert two["p50_ratio"] == pytest.approx(1.2)
    assert two["sagaway_A_thr_forwarder_ms_per_wf"] == pytest.approx(500.0)
    goals = network.goals(rows)
    assert [g["met"] for g in goals] == [True, False]
    doc = {
        "date": "d",
        "command": "c",
        "duration_s": 60.0,
        "json": "j",
        "repeat": 3,
        "machine": {"nproc": 2},
        "settings": {"path": "p"},
        "rows": rows,
        "goals": goals,
    }
    text = network.render(doc)
    assert text.startswith(network.BEGIN) and text.endswith(network.END)
    assert "| 2 | 2.30 | 200.0 (100.0-300.0) | 100.0 | 2.00 |" in text
    assert "| 2.00 + 3.00 / 2.00 + 3.00 |" in text  # client + PostgreSQL ms per workflow
    assert "MET" in text and "MISSED" in text


def _echo_server() -> socket.socket:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            with conn:
                while data := conn.recv(65536):
                    conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    return server


@pytest.mark.parametrize("delay_ms", [0.0, 25.0])
def test_the_forwarder_relays_every_byte_and_holds_each_chunk_the_delay(delay_ms: float) -> None:
    echo = _echo_server()
    forwarder = socket.create_server(("127.0.0.1", 0))
    threading.Thread(
        target=netdelay.relay_forever,
        args=(forwarder, echo.getsockname(), delay_ms),
        daemon=True,
    ).start()
    with socket.create_connection(forwarder.getsockname()) as conn:
        for payload in (b"ping", b"x" * 200_000):
            t0 = time.monotonic()
            conn.sendall(payload)
            got = b""
            while len(got) < len(payload):
                got += conn.recv(65536)
            elapsed = time.monotonic() - t0
            assert got == payload
            assert elapsed >= 2 * delay_ms / 1000  # there and back, each held the delay
    forwarder.close()
    echo.close()


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2"
)
def test_the_namespace_link_and_forwarder_are_removed_even_when_the_run_fails() -> None:
    path = network.NetPath("forwarder")
    with pytest.raises(RuntimeError, match="the run failed"), path:
        path.set_rtt(1.0)
        assert path.forwarder is not None
        pid = path.forwarder.pid
        assert (
            path.ns
            in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        )
        raise RuntimeError("the run failed")
    assert (
        path.ns
        not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    )
    assert subprocess.run(["ip", "link", "show", path.host_if], capture_output=True).returncode != 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2"
)
def test_a_killed_run_s_namespace_is_removed_by_the_next_run_and_a_live_one_kept() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead, live = f"{network.NS_PREFIX}{gone.pid}", f"{network.NS_PREFIX}{os.getpid()}"
    for name in (dead, live):
        subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        removed = network.remove_stale()
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert dead in removed and dead not in listed.split()
        assert live not in removed and live in listed.split()
    finally:
        for name in (dead, live):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
