"""Payload JSON: the adapters that serialise by annotation, the checks that refuse what could not
be read back unchanged, and the decoder of stored JSON (see the package's docstring)."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pydantic_core

from sagaway import _sealed, errors

if TYPE_CHECKING:
    import pydantic

DEFAULT_PAYLOAD_LIMIT = 2 * 1024 * 1024
"""Bytes of JSON allowed for one payload (arguments or a result)."""

_HINT = "payloads are JSON: use dataclasses, pydantic models, str/int/float/bool/None, Decimal, "
_HINT += "datetime, UUID, Enum, and lists/dicts/tuples of these"


MAX_DEPTH = 200
"""Levels of nested lists/objects the JSON decoder (``pydantic_core.from_json``) reads back."""

_SERIALISE_CONFIG: pydantic.ConfigDict = {"ser_json_inf_nan": "constants"}
"""Keeps an untyped NaN/Infinity as the number (pydantic's default writes ``null``), so the
encode can see it and refuse it instead of storing a changed value."""


class _Adapter:
    """Validates one annotation, and serialises it with ``_SERIALISE_CONFIG``.

    Pydantic refuses a config for a model or dataclass type itself; those serialise through
    ``list[annotation]``, as the outermost config is what governs the untyped values inside.
    """

    __slots__ = ("_dump", "_to_python", "_validate", "_validated", "_wrapped")

    def __init__(self, annotation: Any) -> None:
        import pydantic  # here: reading stored JSON (load_json, the CLI's reads) needs none of it

        self._validate = pydantic.TypeAdapter(annotation)
        try:
            self._dump = pydantic.TypeAdapter(annotation, config=_SERIALISE_CONFIG)
            self._wrapped = False
        except pydantic.PydanticUserError:
            self._dump = pydantic.TypeAdapter(list[annotation], config=_SERIALISE_CONFIG)
            self._wrapped = True
        # pydantic-core's own calls, once the adapters are built (a first call builds a
        # deferred one): every activity call and result passes here, and the adapters' Python
        # wrappers cost more than the C calls they forward to with these same arguments.
        self._to_python: Callable[..., Any] | None = None
        self._validated: Callable[..., Any] | None = None

    def validate_python(self, data: Any) -> Any:
        validated = self._validated
        if validated is not None:
            return validated(data, allow_partial=False)
        value = self._validate.validate_python(data)
        validator = self._validate.validator
        if isinstance(validator, pydantic_core.SchemaValidator):
            self._validated = validator.validate_python
        return value

    def dump_python(self, value: Any) -> Any:
        to_python = self._to_python
        if to_python is None:
            dumped = self._dump.dump_python([value] if self._wrapped else value, mode="json")
            serializer = self._dump.serializer
            if isinstance(serializer, pydantic_core.SchemaSerializer):
                self._to_python = serializer.to_python
            return dumped[0] if self._wrapped else dumped
        if self._wrapped:
            return to_python([value], mode="json", warnings=True)[0]
        return to_python(value, mode="json", warnings=True)

    def dump_many(self, values: list[Any]) -> list[Any]:
        if self._wrapped:
            dumped: list[Any] = self._dump.dump_python(values, mode="json")
            return dumped
        return [self._dump.dump_python(v, mode="json") for v in values]


def _adapter_for(annotation: Any) -> _Adapter:
    if annotation is inspect.Parameter.empty:
        annotation = Any
    return _Adapter(annotation)


def _dump(data: Any, what: str, limit: int) -> str:
    try:
        text = pydantic_core.to_json(data).decode()
    except ValueError as exc:  # PydanticSerializationError is a ValueError
        raise errors.PayloadError(f"{what} cannot be serialised: {_why(exc)}") from None
    # len(text) <= byte length <= 4 * len(text): only encode when it could matter.
    if len(text) > limit // 4 and len(text.encode()) > limit:
        raise errors.PayloadError(
            f"{what} is {len(text.encode())} bytes of JSON, over the {limit}-byte payload limit; "
            "store large data elsewhere and pass a reference (or raise payload_limit)"
        )
    # Fast filters (C string scans) before the exact check, the decoder itself: nesting can be
    # no deeper than the number of brackets, and a non-finite number is spelt with these letters.
    if "NaN" in text or "Infinity" in text or text.count("[") + text.count("{") > MAX_DEPTH:
        _check_readable(text, what)
    _sealed.refuse_envelope(text, what)
    return text


def explain(exc: pydantic.ValidationError) -> str:
    """A validation error as one readable line per wrong field, each indented by two spaces:
    ``  amount: Input should be a valid integer (got 'abc')``, instead of pydantic's dump."""
    lines = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "value"
        line = f"  {where}: {error['msg']}"
        if error["type"] != "missing":  # a missing field's input is the object around it
            got = repr(error["input"])
            line += f" (got {got if len(got) <= 60 else got[:57] + '...'})"
        lines.append(line)
    return "\n".join(lines)


def _spells_non_finite(text: str) -> bool:
    return "NaN" in text or "Infinity" in text


def _read_back(decode: Callable[[str], Any], text: str, what: str) -> None:
    """Decode ``text`` as the workflow will: a ``Decimal("NaN")`` is written as the string
    "NaN", which a ``Decimal`` annotation then refuses to read."""
    try:
        decode(text)
    except errors.PayloadError as exc:
        raise errors.PayloadError(
            f"{what} could not be read back once stored, so it is not stored ({exc}); "
            "NaN and Infinity (float or Decimal) are not payloads: send None or a string instead"
        ) from None


def _why(exc: ValueError | TypeError) -> str:
    message = str(exc)
    if "surrogate" in message:
        return (
            f"{message}; strings must be valid Unicode (a lone surrogate such as '\\ud800' "
            "cannot be stored): fix the text, or send bytes as base64"
        )
    if "depth" in message or "recursion" in message:
        return f"{message}; {_DEPTH_HINT}"
    return f"{message}; {_HINT}"


_DEPTH_HINT = (
    f"at most {MAX_DEPTH} levels of nested lists/objects can be read back (the object holding a "
    "function's arguments is one): flatten the data"
)


def _check_readable(text: str, what: str) -> None:
    """Refuse JSON that ``load_json`` could not read back, or only with NaN/Infinity."""
    try:
        pydantic_core.from_json(text, allow_inf_nan=False)
    except ValueError as exc:
        if "recursion limit" in str(exc):
            raise errors.PayloadError(f"{what} is nested too deeply: {_DEPTH_HINT}") from None
        raise errors.PayloadError(
            f"{what} holds NaN or Infinity ({exc}); JSON has no such numbers and Sagaway stores "
            "values unchanged or not at all: send None, a string, or a Decimal instead"
        ) from None


def load_json(text: str, what: str) -> Any:
    """Parse stored JSON (``what`` names it in the error: a PayloadError, never a crash)."""
    if text.startswith(_sealed.SEALED_PREFIX):
        raise _sealed.sealed_error(text, what)
    try:
        return pydantic_core.from_json(text)
    except ValueError as exc:
        raise errors.PayloadError(f"stored {what} is not valid JSON: {exc}") from None


@functools.cache
def _any() -> _Adapter:
    """The adapter of untyped values, built at first use: building it costs ~85 ms, which
    every process would otherwise pay at import (every CLI command, every server start)."""
    return _Adapter(Any)


def encode_value(value: Any, what: str, limit: int = DEFAULT_PAYLOAD_LIMIT) -> str:
    """Encode a value with no declared type (signals, user-facing JSON)."""
    try:
        data = _any().dump_python(value)
    except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as exc:
        raise errors.PayloadError(
            f"{what} cannot be serialised ({type(value).__name__}): {_why(exc)}"
        ) from None
    return _dump(data, what, limit)


def args_hash(args_json: str) -> str:
    """A digest of arguments that does not depend on dict key order."""
    canonical = json.dumps(json.loads(args_json), sort_keys=True, separators=(",", ":"))
    import hashlib  # here: loading OpenSSL costs `sagaway list`, which hashes nothing, ~4 %

    return hashlib.sha256(canonical.encode()).hexdigest()
