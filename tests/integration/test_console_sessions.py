"""Console sessions (issue 33, finding 5): a session cookie is a random id new at each login,
it expires (idle and absolute, on a fake clock), logout revokes it even where it was copied, and
wrong tokens back off per client address and globally (delays counted on a fake clock, no
wall-clock sleeps) without locking the real user out."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

import sagaway as sw
from sagaway.console import ConsoleConfig, create_app
from sagaway.console.security import SESSION_COOKIE
from sagaway.console.sessions import ADDRESS, GLOBAL

BASE = "http://127.0.0.1:8080"
TOKEN = "s3cret-token"
CSRF = re.compile(r'name="csrf" value="([0-9a-f]{64})"')
JSON = {"Accept": "application/json"}


class FakeTime:
    """A clock that moves only when told, and a sleep that records its delay and moves it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'console.db'}"

    async def create() -> None:
        async with sw.Manager(url).connect():
            pass

    asyncio.run(create())
    return url


@pytest.fixture
def fake() -> FakeTime:
    return FakeTime()


@pytest.fixture
def app(url: str, fake: FakeTime) -> Starlette:
    config = ConsoleConfig(url=url, token=TOKEN, session_idle=3600, session_lifetime=86400)
    return create_app(config, clock=fake.clock, sleep=fake.sleep)


@contextmanager
def browser(app: Starlette, address: str = "10.0.0.1") -> Iterator[TestClient]:
    with TestClient(app, base_url=BASE, client=(address, 50000)) as client:
        yield client


def login(client: TestClient, token: str = TOKEN) -> int:
    page = client.get("/login")
    found = CSRF.search(page.text)
    assert found is not None, page.text
    form = {"csrf": found.group(1), "token": token, "next": "/"}
    response = client.post("/login", data=form, headers={"Origin": BASE}, follow_redirects=False)
    return response.status_code


def logout(client: TestClient) -> int:
    found = CSRF.search(client.get("/").text)
    assert found is not None
    response = client.post(
        "/logout", data={"csrf": found.group(1)}, headers={"Origin": BASE}, follow_redirects=False
    )
    return response.status_code


def status_with(app: Starlette, cookie: str) -> int:
    """What a request carrying only this session cookie gets (another client: a copy)."""
    with browser(app, "10.9.9.9") as other:
        other.cookies.set(SESSION_COOKIE, cookie)
        return other.get("/", headers=JSON).status_code


def test_each_login_gets_a_new_random_session(app: Starlette) -> None:
    cookies = []
    for _ in range(2):
        with browser(app) as client:
            assert login(client) == 303
            cookies.append(client.cookies[SESSION_COOKIE])
            assert client.get("/", headers=JSON).status_code == 200
    assert cookies[0] != cookies[1]
    assert all(TOKEN not in c and len(c) >= 43 for c in cookies)
    assert status_with(app, "0" * 64) == 401  # a made-up or old-style value means nothing


def test_logout_revokes_the_cookie_wherever_it_was_copied(app: Starlette) -> None:
    with browser(app) as client:
        assert login(client) == 303
        stolen = client.cookies[SESSION_COOKIE]
        assert status_with(app, stolen) == 200
        assert logout(client) == 303
    assert status_with(app, stolen) == 401


def test_sessions_expire_when_idle_and_at_their_lifetime(app: Starlette, fake: FakeTime) -> None:
    with browser(app) as client:
        assert login(client) == 303
        idle = client.cookies[SESSION_COOKIE]
    fake.now += 3599
    assert status_with(app, idle) == 200  # used: idle time starts again
    fake.now += 3601
    assert status_with(app, idle) == 401
    assert status_with(app, idle) == 401  # it ended: coming back does not revive it

    with browser(app) as client:
        assert login(client) == 303
        busy = client.cookies[SESSION_COOKIE]
    for _ in range(24):
        fake.now += 3500
        assert status_with(app, busy) == 200
    fake.now += 3500  # 24.3 h after the login: past its lifetime, however used
    assert status_with(app, busy) == 401


def test_wrong_logins_back_off_per_address(app: Starlette, fake: FakeTime) -> None:
    answers: dict[int, int] = {}
    with browser(app, "203.0.113.7") as attacker:
        for _ in range(200):
            code = login(attacker, "guess")
            answers[code] = answers.get(code, 0) + 1
        # Five free tries, then each failure must be waited out before another is checked.
        assert answers == {401: ADDRESS.free, 429: 200 - ADDRESS.free}
        refused = attacker.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
        assert refused.status_code == 429  # not even the right token is checked now
        assert refused.headers["Retry-After"] == str(int(ADDRESS.base))
        waits = []
        for _ in range(12):
            refused = attacker.get("/", headers={"Authorization": "Bearer guess"})
            assert refused.status_code == 429
            waits.append(int(refused.headers["Retry-After"]))
            fake.now += waits[-1]
            assert login(attacker, "guess") == 401  # one check per wait
        assert waits[:9] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
        assert waits[9:] == [int(ADDRESS.cap)] * 3
    with browser(app, "198.51.100.1") as user:  # the real user, elsewhere, is not slowed
        assert login(user) == 303
    assert fake.slept == []  # one address alone never reaches the global back-off
    with browser(app, "203.0.113.7") as attacker:
        fake.now += ADDRESS.cap
        assert login(attacker) == 303  # after the wait, the right token gets in
        assert login(attacker, "guess") == 401  # and the address starts afresh


def test_wrong_bearer_tokens_count_as_failed_logins(app: Starlette, fake: FakeTime) -> None:
    with browser(app, "203.0.113.8") as script:
        codes = [
            script.get("/", headers={**JSON, "Authorization": "Bearer nope"}).status_code
            for _ in range(ADDRESS.free + 2)
        ]
        assert codes == [401] * ADDRESS.free + [429] * 2
        fake.now += ADDRESS.base
        ok = script.get("/", headers={**JSON, "Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200


def test_failures_from_many_addresses_slow_every_check_but_lock_nobody_out(
    app: Starlette, fake: FakeTime
) -> None:
    for i in range(120):
        with browser(app, f"192.0.2.{i}") as attacker:
            assert login(attacker, "guess") == 401  # a delay, never a refusal
    delays = fake.slept
    assert len(delays) == 120 - GLOBAL.free
    assert delays[0] == GLOBAL.base and delays[1] == GLOBAL.base * 2
    assert max(delays) == GLOBAL.cap and delays[-1] == GLOBAL.cap
    with browser(app, "198.51.100.2") as user:
        assert login(user) == 303
    assert fake.slept[-1] == GLOBAL.cap  # the real user waited the cap at most, then got in
