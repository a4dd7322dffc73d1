# ruff: noqa
"""SW101-SW108: non-determinism in workflow code (and in a helper a workflow calls)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import random
import sqlite3
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime
from os import environ
from pathlib import Path

import httpx
import requests

import sagaway as sw

manager = sw.Manager()


@manager.register_activity
async def fetch(url: str) -> str:
    return url


@manager.register_workflow
async def clocks() -> float:
    started = time.time()  # expect: SW101
    deadline = datetime.now()  # expect: SW101
    utc = dt.datetime.utcnow()  # expect: SW101
    today = date.today()  # expect: SW101
    tick = time.monotonic()  # expect: SW101
    loop_time = asyncio.get_running_loop().time()  # expect: SW101
    year = time.strftime("%Y")  # expect: SW101
    fixed = time.strftime("%Y", time.gmtime(0))  # explicit time: fine
    return started


@manager.register_workflow(name="random")
async def randomness() -> str:
    pick = random.choice(["a", "b"])  # expect: SW102
    key = uuid.uuid4()  # expect: SW102
    raw = os.urandom(8)  # expect: SW102
    seeded = random.Random(42).random()  # seeded: fine
    return f"{pick}{key}{raw!r}{seeded}"


@manager.register_workflow
async def environment() -> str:
    region = os.environ["REGION"]  # expect: SW103
    zone = os.getenv("ZONE")  # expect: SW103
    other = environ.get("OTHER")  # expect: SW103
    return f"{region}{zone}{other}"


@manager.register_workflow
async def threads() -> None:
    threading.Thread(target=print).start()  # expect: SW104
    with ThreadPoolExecutor() as pool:  # expect: SW104
        pool.submit(print)
    await asyncio.to_thread(print)  # expect: SW104
    await asyncio.get_running_loop().run_in_executor(None, print)  # expect: SW104


@manager.register_workflow
async def direct_io(path: str) -> str:
    with open(path) as handle:  # expect: SW105
        text = handle.read()
    requests.post("https://example.com", data=text)  # expect: SW105
    async with httpx.AsyncClient() as client:  # expect: SW105
        await client.get("https://example.com")
    conn = sqlite3.connect("app.db")  # expect: SW105
    subprocess.run(["true"], check=True)  # expect: SW105
    config = Path("config.toml").read_text()  # expect: SW105
    return text + config


@manager.register_workflow
async def sleeps() -> None:
    await asyncio.sleep(10)  # expect: SW106
    time.sleep(1)  # expect: SW106
    await asyncio.sleep(0)  # only yields to the event loop: fine
    await manager.sleep(10)  # durable: fine


@manager.register_workflow
async def set_order(urls: set[str], names: list[str]) -> list[str]:
    results = []
    for url in {"a", "b"}:  # expect: SW107
        results.append(await fetch(url))
    for url in set(names):  # expect: SW107
        await fetch(url)
    for url in urls:  # expect: SW107
        await fetch(url)
    pending = set(names) | {"c"}
    fetched = [await fetch(u) for u in pending]  # expect: SW107
    listed = list(pending - {"a"})  # expect: SW107
    joined = ",".join(frozenset(names))  # expect: SW107
    for url in sorted(pending):  # sorted: fine
        await fetch(url)
    count = len({u for u in pending})  # order-free: fine
    smallest = min(u for u in pending)  # order-free: fine
    return fetched + listed + [joined, smallest, str(count)] + results


@manager.register_workflow
async def hashing(name: str) -> int:
    bucket = hash(name) % 10  # expect: SW108
    return bucket + id(name)  # expect: SW108


def stamp() -> float:
    return time.time()  # expect: SW101


def nested_stamp() -> float:
    return stamp()


@manager.register_workflow
async def uses_helper() -> float:
    return nested_stamp()


@manager.register_workflow
async def nested_function() -> list[float]:
    def later() -> float:
        return time.time()  # expect: SW101

    return [later() for _ in range(2)]
