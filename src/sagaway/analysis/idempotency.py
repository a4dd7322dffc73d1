"""SW301: an activity that writes to an external system must pass an idempotency key.

Activities run at least once: the attempt in flight when a process dies runs again, and a
timeout does not mean the write did not happen. ``sw.activity_info().idempotency_key`` is the
same on every attempt, so a service that dedupes on it applies the write once.

The heuristic, tuned for few false positives (see docs/lint.md):

* a *write* is a call of a method whose name is a typical remote write (``post``, ``put``,
  ``patch``, ``delete``, ``publish``, ``send``, ``send_message``, ``sendmail``, ``produce``,
  ``insert_one``, ``update_many``, ``put_item``, ``create``, ``save``, ``commit``...),
  ``.insert()`` with fewer than two arguments (so not ``list.insert(i, x)``), ``open(path, "w")``
  (any writing mode), ``.write_text()``/``.write_bytes()``, or a string literal holding a SQL
  write (``INSERT INTO``, ``UPDATE ... SET``, ``DELETE FROM``, ``MERGE INTO``, ``REPLACE INTO``);
* *evidence of idempotency* is any identifier, keyword argument or string in the activity that
  mentions ``activity_info``, ``idempot...``, ``dedup...`` or a client token
  (``ClientToken``, ``client_request_token``): e.g. an ``Idempotency-Key`` header, a
  ``dedupe_id=`` argument, or an ``idempotency_key`` parameter the workflow passes in.

Only the activity's own body is read; a write hidden in a helper function is not seen.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from sagaway.analysis.index import FunctionInfo, ModuleIndex

Raw = tuple[ast.AST, str, str]

_WRITE_METHODS = frozenset(
    {
        "post",
        "put",
        "patch",
        "delete",
        "publish",
        "send",
        "send_message",
        "send_messages",
        "sendall",
        "sendmail",
        "send_email",
        "produce",
        "basic_publish",
        "insert_one",
        "insert_many",
        "update_one",
        "update_many",
        "replace_one",
        "delete_one",
        "delete_many",
        "bulk_write",
        "put_item",
        "put_object",
        "batch_write_item",
        "create",
        "save",
        "bulk_create",
        "commit",
        "write_text",
        "write_bytes",
    }
)

_SQL_WRITE = re.compile(
    r"\b(INSERT\s+INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM|MERGE\s+INTO|REPLACE\s+INTO|UPSERT\s)",
    re.IGNORECASE,
)
_EVIDENCE = re.compile(
    r"activity_info|idempot|dedup|client_?request_?token|client_?token", re.IGNORECASE
)


def _write_in(module: ModuleIndex, info: FunctionInfo) -> tuple[ast.expr, str] | None:
    """The first write-like node of the activity (in source order) and how it looks, or None."""
    local = module.local_names(info.node)
    writes: list[tuple[ast.expr, str]] = []
    for node in (n for stmt in info.node.body for n in ast.walk(stmt)):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                if func.attr in _WRITE_METHODS:
                    writes.append((node, f"`.{func.attr}()`"))
                elif func.attr == "insert" and len(node.args) < 2:
                    writes.append((node, "`.insert()`"))
            if module.is_builtin(func, "open", local) and _writing_mode(node):
                writes.append((node, "`open()` for writing"))
        elif isinstance(node, ast.Constant | ast.JoinedStr):
            match = _SQL_WRITE.search(_literal_text(node))
            if match:
                writes.append((node, f"SQL `{match.group(1).split()[0].upper()}`"))
    if not writes:
        return None
    return min(writes, key=lambda w: (w[0].lineno, w[0].col_offset))


def _literal_text(node: ast.Constant | ast.JoinedStr) -> str:
    """A string literal's text; an f-string's placeholders read as ``x``."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else ""
    return "".join(
        v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "x"
        for v in node.values
    )


def _writing_mode(call: ast.Call) -> bool:
    mode: ast.expr | None = call.args[1] if len(call.args) > 1 else None
    for keyword in call.keywords:
        if keyword.arg == "mode":
            mode = keyword.value
    return (
        isinstance(mode, ast.Constant)
        and isinstance(mode.value, str)
        and any(c in mode.value for c in "wax+")
    )


def _has_evidence(fn: ast.AST) -> bool:
    for node in ast.walk(fn):
        text: str | None = None
        if isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        elif isinstance(node, ast.keyword | ast.arg):
            text = node.arg
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        if text and _EVIDENCE.search(text):
            return True
    return False


def check_idempotency(module: ModuleIndex) -> Iterator[Raw]:
    """SW301 over every registered activity of the module."""
    for info in module.activities:
        found = _write_in(module, info)
        if found is None or _has_evidence(info.node):
            continue
        node, what = found
        yield (
            node,
            "SW301",
            (
                f"activity `{info.name}` writes to an external system ({what}) without an "
                "idempotency key: a retried or recovered attempt repeats the write; pass "
                "`sw.activity_info().idempotency_key` to the service (or dedupe on it)"
            ),
        )
