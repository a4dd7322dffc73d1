"""Rewrite the calls of a store verb whose arguments became one record.

When a verb of ``store/contract.py`` changes from many parameters to one record (and a few
keywords beside it: ``now``, ``audit``, ...), every call written the old way is rewritten the
same way. This does it by syntax tree, so that a branch written against the old signature can be
brought over mechanically after a merge, then ``ruff format`` lays the calls out::

    python scripts/verb_calls_to_records.py fork_workflow ForkRequest \\
        --first source_run_id --fields run_id,key,key_space,call_ids,code_version,payloads \\
        --keep now,audit tests/integration/test_store_fork.py

``--first`` names the record field the old first positional argument goes to (``a=b``: the
old argument ``a`` is the field ``b``, as ``schedule_id=id``); ``--fields`` the keyword
arguments that move into the record (same spelling); ``--keep`` those that stay on the call.
Fields named in ``--tuples`` are tuples in the record: a list literal becomes a tuple literal,
any other value ``tuple(value)``. The record's name must then be imported where it is used.
Verbs rewritten so far: ``fork_workflow`` (``ForkRequest``), ``receive_signal``
(``SignalReceive``), ``put_schedule`` (``SchedulePut``), ``set_schedule_paused``
(``SchedulePause``, first ``schedule_id=id``), ``fire_schedule`` (``ScheduleFire``, first
``schedule_id=id``), ``acquire_queue_slot`` (``QueueAdmission``, first ``queue``).
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys
from collections.abc import Callable

Text = Callable[[ast.expr], str]


def _pairs(text: str) -> dict[str, str]:
    out = {}
    for item in filter(None, text.split(",")):
        old, _, new = item.partition("=")
        out[old] = new or old
    return out


class Rewriter:
    def __init__(self, args: argparse.Namespace) -> None:
        self.verb: str = args.verb
        self.record: str = args.record
        self.first = _pairs(args.first)
        self.fields = _pairs(args.fields)
        self.keep = set(filter(None, args.keep.split(",")))
        self.tuples = set(filter(None, args.tuples.split(",")))

    def rewrite(self, source: str, where: str) -> tuple[str, int]:
        """``source`` with each call of the verb rewritten, and how many there were."""
        offsets = [0]
        for line in source.splitlines(keepends=True):
            offsets.append(offsets[-1] + len(line))

        def at(line: int, column: int) -> int:
            return offsets[line - 1] + column

        def text(node: ast.expr) -> str:
            end = at(node.end_lineno or node.lineno, node.end_col_offset or 0)
            return source[at(node.lineno, node.col_offset) : end]

        edits = []
        for node in ast.walk(ast.parse(source)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr != self.verb:
                continue
            in_record, kept = self._arguments(node, text, f"{where}:{node.lineno}")
            call = ", ".join([f"{self.record}({', '.join(in_record)})", *kept])
            start = at(node.func.end_lineno or node.lineno, node.func.end_col_offset or 0)
            end = at(node.end_lineno or node.lineno, node.end_col_offset or 0)
            edits.append((start, end, f"({call})"))
        for start, end, new in sorted(edits, reverse=True):
            source = source[:start] + new + source[end:]
        return source, len(edits)

    def _arguments(self, call: ast.Call, text: Text, where: str) -> tuple[list[str], list[str]]:
        if len(call.args) > len(self.first):
            raise SystemExit(f"{where}: more positional arguments than --first names")
        in_record = [
            f"{field}={text(value)}"
            for field, value in zip(self.first.values(), call.args, strict=False)
        ]
        kept = []
        for keyword in call.keywords:
            if keyword.arg is None:
                raise SystemExit(f"{where}: a **mapping argument: rewrite it by hand")
            if keyword.arg in self.keep:
                kept.append(f"{keyword.arg}={text(keyword.value)}")
            elif keyword.arg in self.fields:
                field = self.fields[keyword.arg]
                in_record.append(f"{field}={self._value(field, keyword.value, text)}")
            elif keyword.arg in self.first:
                in_record.append(f"{self.first[keyword.arg]}={text(keyword.value)}")
            else:
                raise SystemExit(f"{where}: argument {keyword.arg!r} is in no option")
        return in_record, kept

    def _value(self, field: str, value: ast.expr, text: Text) -> str:
        if field not in self.tuples or isinstance(value, ast.Tuple):
            return text(value)
        if isinstance(value, ast.List):
            items = [text(item) for item in value.elts]
            return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
        return f"tuple({text(value)})"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("verb")
    parser.add_argument("record")
    parser.add_argument("paths", nargs="+", type=pathlib.Path)
    parser.add_argument("--first", default="")
    parser.add_argument("--fields", default="")
    parser.add_argument("--keep", default="")
    parser.add_argument("--tuples", default="call_ids,starts")
    args = parser.parse_args(argv)
    rewriter = Rewriter(args)
    for path in args.paths:
        new, count = rewriter.rewrite(path.read_text(), str(path))
        if count:
            path.write_text(new)
            print(f"{path}: {count} call(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
