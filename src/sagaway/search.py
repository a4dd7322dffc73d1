"""Search attributes: typed, indexed values a workflow sets on itself, to find it by them.

Inside a workflow, ``await sw.set_search_attributes(customer="4711", amount=120.5,
region="eu")`` records them as one durable step (replayed, it writes nothing again); a later
call replaces the values of the names it gives and keeps the others. Values are ``str``,
``int``, ``float``, ``bool`` or an aware ``datetime``; they are stored in clear (a codec does not
seal them: the database filters by them).

Outside, listings filter by them: ``manager.list_workflows(where={"customer": "4711"})``,
``where=["amount>=100", "region=eu"]`` or ``sagaway list --where customer=4711``. Each filter is
``name OP value`` with OP one of ``= < <= > >=``; every filter must match. In a text filter a
value that reads as a number matches a string attribute of that text and a numeric attribute of
that number alike (``customer=4711`` finds ``"4711"`` and ``4711``); quote it to mean the
string only (``customer="4711"``); ``true``/``false`` match bools, an ISO 8601 time with a zone
matches datetimes. See docs/search-attributes.md.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping, Sequence
from typing import TypeAlias

from sagaway._engine.text_checks import check_plain
from sagaway.errors import SagawayError
from sagaway.store.records import AttributeFilter, SearchAttribute

AttributeValue: TypeAlias = str | int | float | bool | datetime.datetime
"""What a search attribute holds."""
Where: TypeAlias = Mapping[str, AttributeValue] | Sequence[str] | str
"""Filters by search attributes: names to values (equality), or ``name OP value`` texts."""

MAX_NAME = 100
MAX_TEXT = 1000
_EXACT_INT = 2**53
_FILTER = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*(<=|>=|=|<|>)\s*(.*?)\s*$", re.DOTALL)


async def set_search_attributes(
    attributes: Mapping[str, AttributeValue] | None = None, /, **more: AttributeValue
) -> None:
    """Inside a workflow: set these search attributes of this execution (a durable step)."""
    # Imported here: the filters below are what ``sagaway list --where`` needs, and that
    # command starts without the executor (tests/integration/test_cli_read_path.py).
    from sagaway._engine import publishing
    from sagaway._engine.executor import current_execution

    execution = current_execution()
    if execution is None:
        raise SagawayError(
            "sw.set_search_attributes() records attributes of the running workflow: call it "
            "in workflow code (to find workflows by them: manager.list_workflows(where=...))"
        )
    values = {**(attributes or {}), **more}
    if not values:
        raise ValueError("set_search_attributes() needs at least one attribute")
    converted = [to_attribute(name, value) for name, value in sorted(values.items())]
    await publishing.publish(execution, "search attributes", attributes=converted)


def to_attribute(name: str, value: AttributeValue) -> SearchAttribute:
    """The stored form of one attribute (ValueError/TypeError say what is wrong)."""
    _check_name(name)
    if isinstance(value, bool):
        return SearchAttribute(name=name, kind="bool", number=1.0 if value else 0.0)
    if isinstance(value, int):
        if abs(value) > _EXACT_INT:
            raise ValueError(f"search attribute {name!r}: ints are kept exactly up to 2**53")
        return SearchAttribute(name=name, kind="int", number=float(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"search attribute {name!r}: {value} is not a finite number")
        return SearchAttribute(name=name, kind="float", number=value)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise ValueError(
                f"search attribute {name!r}: a datetime needs a time zone "
                "(datetime.now(timezone.utc), not datetime.now())"
            )
        return SearchAttribute(name=name, kind="datetime", number=value.timestamp())
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise ValueError(f"search attribute {name!r}: at most {MAX_TEXT} characters")
        return SearchAttribute(name=name, kind="str", text=value)
    raise TypeError(
        f"search attribute {name!r}: {type(value).__name__} is not a str, int, float, bool "
        "or datetime"
    )


def from_attribute(attribute: SearchAttribute) -> AttributeValue:
    """The Python value of a stored attribute."""
    number = attribute.number if attribute.number is not None else 0.0
    match attribute.kind:
        case "str":
            return attribute.text or ""
        case "int":
            return int(number)
        case "bool":
            return number != 0
        case "datetime":
            return datetime.datetime.fromtimestamp(number, tz=datetime.UTC)
        case _:
            return number


def filters(where: Where | None) -> tuple[AttributeFilter, ...]:
    """The listing filters ``where`` asks for (ValueError names a malformed one)."""
    if where is None:
        return ()
    if isinstance(where, str):
        return (parse(where),)
    if isinstance(where, Mapping):
        out = []
        for name, value in where.items():
            stored = to_attribute(name, value)
            out.append(AttributeFilter(name=name, text=stored.text, number=stored.number))
        return tuple(out)
    return tuple(parse(text) for text in where)


def parse(text: str) -> AttributeFilter:
    """``name OP value`` as a filter (see the module docstring for how a value reads)."""
    found = _FILTER.match(text)
    if found is None:
        raise ValueError(
            f"not a search attribute filter: {text!r} (write NAME=VALUE, or use < <= > >=)"
        )
    name, op, raw = found.groups()
    _check_name(name)
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return AttributeFilter(name=name, op=op, text=raw[1:-1])
    number = _number(raw)
    if op != "=" and number is not None:
        return AttributeFilter(name=name, op=op, number=number)
    return AttributeFilter(name=name, op=op, text=raw, number=number)


def _number(raw: str) -> float | None:
    if raw.lower() in ("true", "false"):
        return 1.0 if raw.lower() == "true" else 0.0
    try:
        value = float(raw)
    except ValueError:
        pass
    else:
        return value if math.isfinite(value) else None
    try:
        moment = datetime.datetime.fromisoformat(raw)
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo is not None else None


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name or len(name) > MAX_NAME:
        raise ValueError(f"a search attribute name is 1 to {MAX_NAME} characters, not {name!r}")
    check_plain(name, "search attribute name")
