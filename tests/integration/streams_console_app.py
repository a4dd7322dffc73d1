"""The application of the console's events-and-streams browser test (run by ``sagaway worker``):
``chat`` sets search attributes, then writes a stream, one item per ``next`` signal."""

from __future__ import annotations

import sagaway as sw

manager = sw.Manager(poll_interval=0.05, recovery_interval=0.2)


@manager.register_workflow(name="chat")
async def chat(customer: str, words: list[str]) -> int:
    await sw.set_search_attributes(customer=customer, region="eu")
    await sw.set_event("phase", "writing")
    for i, word in enumerate(words):
        await sw.write_stream("tokens", word)
        if i < len(words) - 1:
            await manager.signal("next").receive()
    await sw.set_event("phase", "done")
    return len(words)
