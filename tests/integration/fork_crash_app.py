"""A process that forks an encrypted workflow and is killed (SIGKILL, by itself) inside the
fork's transaction: after the new run, the copies of its steps and its re-sealed arguments are
written, before the steps' re-sealed payloads are. For tests/integration/test_codec_attacks.py.

    python -m tests.integration.fork_crash_app URL SOURCE_KEY NEW_KEY

It prints ``forking`` before the fork; ``not killed`` (a failure) if the fork returns.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

from sagaway.codecs import Compress, Encrypt
from sagaway.store import _fork
from tests.integration import codecs_app
from tests.integration.codecs_app import V1_KEY


def _die_after_the_arguments() -> None:
    """The fork's writes of re-sealed payloads, the process killed after the first (the
    arguments): the store runs them in the fork's transaction, which never commits."""
    replacements = _fork.Fork.replacements

    def dying(self: _fork.Fork) -> Iterator[tuple[str, dict[str, Any]]]:
        writes = replacements(self)
        assert writes[0][0] == "fork_args" and len(writes) > 1
        yield writes[0]
        os.kill(os.getpid(), signal.SIGKILL)
        yield from writes[1:]  # never reached

    _fork.Fork.replacements = dying  # type: ignore[assignment,method-assign]


async def main(url: str, source: str, new_key: str) -> None:
    _die_after_the_arguments()
    manager = codecs_app.bank(url, [Compress(), Encrypt(keys=[V1_KEY])])
    async with manager.connect() as m:
        print("forking", flush=True)
        await m.fork(source, from_step=4, new_key=new_key)
    print("not killed", flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
