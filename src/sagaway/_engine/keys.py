"""Idempotency keys derived by an execution: its activities' keys and its children's default keys.

Both are ``<key space>/<call id>``. The key space is the workflow key with ``%``, ``/`` and ``@``
percent-escaped, so it contains no ``/``: a derived key splits back into exactly one key space and
one call id, and two different durable calls can never share a key:

* a parent's call ``1/1`` (a gather branch) gives ``order-7/1/1``, while its child ``order-7/1``
  derives ``order-7%2F1/1``;
* a user key containing ``/`` is escaped the same way, so it cannot imitate another's calls.

An execution started with ``OnConflict.TERMINATE_EXISTING`` replaces a run under the same key, so
its key space also names the run (``order-7@<run id>``): the new run never reuses the old run's
keys, which a payment API would deduplicate away. The store gives a start that replaces nothing
that form too when executions under keys derived from its plain space are still kept (children
of a purged execution under the key; ``store._params.spare_key_space``).
A fork (``forking``) names its run the same way: the calls it runs again never carry a key an
earlier execution used, even one under the same key that was purged.

A key a workflow chooses for its child must not have that form (``check_chosen_child_key``):
``order-7/2`` could be the key the engine derives for call 2 of ``order-7``, or for a call of
another workflow of the same tree, and two calls would then name one child.
"""

from __future__ import annotations

import re
import urllib.parse

from sagaway.store.records import WorkflowRecord

_ESCAPES = str.maketrans({"%": "%25", "/": "%2F", "@": "%40"})
# A call id: numbers from 1 (no leading zero) joined by ``/`` (``context.Branch``).
_CALL_ID = r"[1-9][0-9]*(?:/[1-9][0-9]*)*"
# ``<key space>/<call id>``: a key space holds no ``/``.
_DERIVED_FORM = re.compile(r"[^/]+/" + _CALL_ID)
_CALL_ID_FORM = re.compile(_CALL_ID)


def key_space(key: str, run_id: str, *, replacing: bool) -> str:
    """The key space of a new execution under ``key``."""
    escaped = key.translate(_ESCAPES)
    return f"{escaped}@{run_id}" if replacing else escaped


def derived_key(record: WorkflowRecord, call_id: str) -> str:
    """The idempotency key of ``record``'s durable call ``call_id``.

    Executions created before key spaces existed keep their ``<key>/<call id>`` keys, so an
    upgrade never changes the key of a call in flight.
    """
    return f"{_space_of(record)}/{call_id}"


def _space_of(record: WorkflowRecord) -> str:
    return record.key_space if record.key_space is not None else record.key


def check_chosen_child_key(key: str, record: WorkflowRecord) -> None:
    """Refuse a child key that ``record``'s workflow code chose and that the engine could
    derive (``ValueError``): one of ``record``'s own derived keys (whose space is its raw key
    if it was created before key spaces existed) or any ``<key space>/<call id>``."""
    own = _space_of(record) + "/"
    if key.startswith(own) and _CALL_ID_FORM.fullmatch(key[len(own) :]):
        owner, call_id = record.key, key[len(own) :]
    elif _DERIVED_FORM.fullmatch(key):
        space, _, call_id = key.partition("/")
        owner = urllib.parse.unquote(space.partition("@")[0])
    else:
        return
    raise ValueError(
        f"child key {key!r} has the form <key>/<call number> of the keys the engine derives "
        f"(it could be the key of call {call_id} of workflow {owner!r}), so two calls could "
        f"name one child: choose a key with a word in its last part, for example "
        f"{key + '-child'!r}, or leave the key out to let the engine derive one"
    )
