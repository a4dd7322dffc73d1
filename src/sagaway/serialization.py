"""Payloads as JSON, typed by the functions' annotations; domain errors through an ErrorMarshaler.

Never pickle: stored data is decoded only into the types the registered function declares.

What is stored must be readable again, so an encode refuses (``PayloadError``, before anything is
recorded) what the decoder would refuse later, instead of leaving a workflow that can never be
resumed or a signal that can never be received:

* nesting deeper than the JSON decoder reads (``MAX_DEPTH`` levels of lists/objects, the
  arguments object included);
* NaN and Infinity, float or ``Decimal``. JSON has no such numbers, and they cannot be kept
  unchanged: pydantic writes an untyped NaN as ``null`` and a ``Decimal`` annotation refuses to
  read back the "NaN" it wrote, and other JSON readers (JavaScript, PostgreSQL's ``jsonb``, other
  languages behind the Engine Server) reject or alter the constants. Refusing them is the only
  choice that never changes a value silently; send ``None`` or a string instead.
  (A pydantic model reached through an ``Any`` annotation serialises with its own config: give it
  ``ser_json_inf_nan="constants"`` for NaN in its untyped fields to be refused rather than nulled.)
* strings that are not valid Unicode (lone surrogates such as ``"\\ud800"``);
* values where the function's annotation leaves them untyped (``Any``, ``object``, none) that
  JSON would give back as another type: a set as a list, a datetime as a string (``_untyped``).

These checks cost nothing on the usual payload: the decoder is run over the text only when it
could hold such a value (more than ``MAX_DEPTH`` brackets, or the letters ``NaN``/``Infinity``),
and only the values in untyped places are walked (a fully typed payload is not).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import inspect
import json
import linecache
import traceback
import typing
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import pydantic
import pydantic_core

from sagaway import _sealed, _untyped, errors
from sagaway.errors import error_record
from sagaway.states import ErrorKind

DEFAULT_PAYLOAD_LIMIT = 2 * 1024 * 1024
"""Bytes of JSON allowed for one payload (arguments or a result)."""

_HINT = "payloads are JSON: use dataclasses, pydantic models, str/int/float/bool/None, Decimal, "
_HINT += "datetime, UUID, Enum, and lists/dicts/tuples of these"


MAX_DEPTH = 200
"""Levels of nested lists/objects the JSON decoder (``pydantic_core.from_json``) reads back."""

_SERIALISE_CONFIG = pydantic.ConfigDict(ser_json_inf_nan="constants")
"""Keeps an untyped NaN/Infinity as the number (pydantic's default writes ``null``), so the
encode can see it and refuse it instead of storing a changed value."""


class _Adapter:
    """Validates one annotation, and serialises it with ``_SERIALISE_CONFIG``.

    Pydantic refuses a config for a model or dataclass type itself; those serialise through
    ``list[annotation]``, as the outermost config is what governs the untyped values inside.
    """

    __slots__ = ("_dump", "_validate", "_wrapped")

    def __init__(self, annotation: Any) -> None:
        self._validate = pydantic.TypeAdapter(annotation)
        try:
            self._dump = pydantic.TypeAdapter(annotation, config=_SERIALISE_CONFIG)
            self._wrapped = False
        except pydantic.PydanticUserError:
            self._dump = pydantic.TypeAdapter(list[annotation], config=_SERIALISE_CONFIG)
            self._wrapped = True

    def validate_python(self, data: Any) -> Any:
        return self._validate.validate_python(data)

    def dump_python(self, value: Any) -> Any:
        if self._wrapped:
            return self._dump.dump_python([value], mode="json")[0]
        return self._dump.dump_python(value, mode="json")

    def dump_many(self, values: list[Any]) -> list[Any]:
        if self._wrapped:
            dumped: list[Any] = self._dump.dump_python(values, mode="json")
            return dumped
        return [self._dump.dump_python(v, mode="json") for v in values]


def _adapter_for(annotation: Any) -> _Adapter:
    if annotation is inspect.Parameter.empty:
        annotation = Any
    return _Adapter(annotation)


_VAR_POSITIONAL = inspect.Parameter.VAR_POSITIONAL
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class FunctionCodec:
    """Encodes a function's arguments and result by its annotations; built once per function."""

    def __init__(self, fn: Callable[..., Any], label: str) -> None:
        self._fn = fn
        self.label = label
        self.signature = inspect.signature(fn)
        self._params: dict[str, tuple[inspect._ParameterKind, _Adapter]] | None = None
        self._result: _Adapter | None = None
        self._untyped_params: dict[str, _untyped.Check] = {}
        """Parameters whose annotations leave values untyped (see ``_untyped``)."""
        self._untyped_result: _untyped.Check | None = None

    def _resolve(self) -> None:
        # Resolved lazily: with `from __future__ import annotations`, a type may be defined
        # after the function that uses it.
        try:
            hints = typing.get_type_hints(self._fn)
        except Exception as exc:
            raise errors.PayloadError(
                f"{self.label}: cannot resolve its type annotations ({exc}); "
                "define the types it uses at module level"
            ) from exc
        params = {}
        for name, param in self.signature.parameters.items():
            annotation = hints.get(name, Any)
            params[name] = (param.kind, _adapter_for(annotation))
            check = _untyped.plan(annotation)
            if check is not None:
                self._untyped_params[name] = check
        ret = hints.get("return", Any)
        # Coroutine functions are annotated with what they return once awaited.
        self._result = _adapter_for(ret)
        self._untyped_result = _untyped.plan(ret)
        self._params = params

    def _adapters(self) -> dict[str, tuple[inspect._ParameterKind, _Adapter]]:
        if self._params is None:
            self._resolve()
        assert self._params is not None
        return self._params

    def encode_args(self, args: tuple[Any, ...], kwargs: dict[str, Any], limit: int) -> str:
        """Bind and encode arguments as a JSON object keyed by parameter name."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.label}: {exc}") from None
        bound.apply_defaults()
        adapters = self._adapters()
        out: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            kind, adapter = adapters[name]
            try:
                if kind is inspect.Parameter.VAR_POSITIONAL:
                    out[name] = adapter.dump_many(list(value))
                elif kind is inspect.Parameter.VAR_KEYWORD:
                    dumped = adapter.dump_many(list(value.values()))
                    out[name] = dict(zip(value, dumped, strict=True))
                else:
                    out[name] = adapter.dump_python(value)
            except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as exc:
                raise errors.PayloadError(
                    f"argument {name!r} of {self.label} cannot be serialised "
                    f"({type(value).__name__}): {_why(exc)}"
                ) from None
        text = _dump(out, f"arguments of {self.label}", limit)
        if _spells_non_finite(text):
            _read_back(self.decode_args, text, f"arguments of {self.label}")
        for name, check in self._untyped_params.items():
            if name in bound.arguments:
                _refuse_changed(check, bound.arguments[name], name, adapters[name][0], self.label)
        return text

    def decode_args(self, text: str) -> tuple[list[Any], dict[str, Any]]:
        """Decode stored arguments into call arguments of the annotated types."""
        return self._typed(load_json(text, f"arguments of {self.label}"), "stored ")

    def type_args(
        self, args: list[Any], kwargs: dict[str, Any]
    ) -> tuple[list[Any], dict[str, Any]]:
        """Call arguments given as plain JSON values (``sagaway start --app``), bound to the
        signature (``TypeError`` for a missing or unknown one) and validated into the annotated
        types (``PayloadError``, one line per wrong field): what ``encode_args`` stores as is."""
        params = self.signature.parameters
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            unknown = [n for n in kwargs if n not in params]
            if unknown:
                raise TypeError(f"{self.label} has no parameter {', '.join(map(repr, unknown))}")
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.label}: {exc}") from None
        return self._typed(dict(bound.arguments), "")

    def _typed(self, data: dict[str, Any], stored: str) -> tuple[list[Any], dict[str, Any]]:
        adapters = self._adapters()
        for name in data:
            if name not in adapters:
                raise errors.PayloadError(
                    f"stored arguments of {self.label} name {name!r}, which the function no "
                    "longer has; restore the parameter or finish old workflows before renaming it"
                )
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        # In the signature's order, not the stored one: arguments stored by name (a client that
        # knows the workflow by name only) may come in any order or leave defaults out. After a
        # left-out positional parameter, the later ones are passed by name.
        by_name = False
        for name, (kind, adapter) in adapters.items():
            if name not in data:
                by_name = by_name or kind in _POSITIONAL
                continue
            value = data[name]
            if by_name and kind in (inspect.Parameter.POSITIONAL_ONLY, _VAR_POSITIONAL):
                raise errors.PayloadError(
                    f"{stored}arguments of {self.label} give {name!r} but leave out a positional "
                    "parameter before it"
                )
            try:
                if kind is _VAR_POSITIONAL:
                    args.extend(adapter.validate_python(v) for v in value)
                elif kind is inspect.Parameter.VAR_KEYWORD:
                    kwargs.update({k: adapter.validate_python(v) for k, v in value.items()})
                elif kind is inspect.Parameter.KEYWORD_ONLY or by_name:
                    kwargs[name] = adapter.validate_python(value)
                else:
                    args.append(adapter.validate_python(value))
            except pydantic.ValidationError as exc:
                raise errors.PayloadError(
                    f"{stored}argument {name!r} of {self.label} does not match its annotation "
                    f"({exc.title}):\n{explain(exc)}"
                ) from None
        return args, kwargs

    def encode_result(self, value: Any, limit: int) -> str:
        self._adapters()
        assert self._result is not None
        try:
            data = self._result.dump_python(value)
        except (pydantic_core.PydanticSerializationError, ValueError, TypeError) as exc:
            raise errors.PayloadError(
                f"result of {self.label} cannot be serialised ({type(value).__name__}): {_why(exc)}"
            ) from None
        text = _dump(data, f"result of {self.label}", limit)
        if _spells_non_finite(text):
            _read_back(self.decode_result, text, f"result of {self.label}")
        if self._untyped_result is not None:
            _refuse_changed(self._untyped_result, value, "result", None, self.label)
        return text

    def decode_result(self, text: str | None) -> Any:
        self._adapters()
        assert self._result is not None
        data = None if text is None else load_json(text, f"result of {self.label}")
        try:
            return self._result.validate_python(data)
        except pydantic.ValidationError as exc:
            raise errors.PayloadError(
                f"stored result of {self.label} does not match its return annotation "
                f"({exc.title}):\n{explain(exc)}"
            ) from None


def _refuse_changed(
    check: _untyped.Check,
    value: Any,
    where: str,
    kind: inspect._ParameterKind | None,
    label: str,
) -> None:
    """``PayloadError`` if a value the annotation leaves untyped would come back changed
    (``kind``: of the parameter ``where``; None: ``value`` is the result)."""
    if kind is _VAR_POSITIONAL:
        values = [(v, f"{where}[{i}]") for i, v in enumerate(value)]
    elif kind is inspect.Parameter.VAR_KEYWORD:
        values = [(v, f"{where}[{k!r}]") for k, v in value.items()]
    else:
        values = [(value, where)]
    found = next((f for v, w in values if (f := _untyped.first(check, v, w))), None)
    if found is None:
        return
    what = f"result of {label}" if kind is None else f"argument {where!r} of {label}"
    place, bad = found
    try:
        if place.startswith("a key of"):
            (dumped,) = _any().dump_python({bad: None})
        else:
            dumped = _any().dump_python(bad)
    except (ValueError, TypeError):
        dumped = None
    raise errors.PayloadError(_untyped.refusal(what, place, bad, dumped))


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
    return hashlib.sha256(canonical.encode()).hexdigest()


# ----------------------------------------------------------------------------- errors


@runtime_checkable
class ErrorMarshaler(Protocol):
    """Lets domain error types cross the database boundary."""

    def marshal_completable_error(self, err: BaseException) -> bytes | None:
        """Bytes for a completable error, or None when ``err`` is not completable."""
        ...

    def unmarshal_completable_error(self, data: bytes) -> BaseException:
        """Rebuild the error from what ``marshal_completable_error`` produced."""
        ...


def _all_subclasses(cls: type[BaseException]) -> list[type[BaseException]]:
    out: list[type[BaseException]] = []
    stack = [cls]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(current.__subclasses__())
    return out


class DefaultErrorMarshaler:
    """Marshals ``CompletableError`` and its subclasses as JSON.

    Unmarshalling rebuilds the same class only if it is already imported (classes are matched by
    module and qualified name; nothing is imported or evaluated from stored data). Otherwise it
    returns a plain ``CompletableError`` carrying the message, code and details, with
    ``original_type`` naming the class that was recorded.
    """

    def marshal_completable_error(self, err: BaseException) -> bytes | None:
        if not isinstance(err, errors.CompletableError):
            return None
        cls = type(err)
        payload = {
            "type": f"{cls.__module__}:{cls.__qualname__}",
            "message": err.message,
            "code": err.code,
            "details": err.details,
        }
        try:
            return pydantic_core.to_json(payload, fallback=str)
        except ValueError:
            # Text that is not valid Unicode (a lone surrogate in the message): the standard
            # encoder escapes it, and json.loads gives the same string back.
            return json.dumps(payload, default=str).encode()

    def unmarshal_completable_error(self, data: bytes) -> BaseException:
        payload = json.loads(data)
        type_name = str(payload.get("type", ""))
        message = str(payload.get("message", ""))
        code = payload.get("code")
        details = payload.get("details") or {}
        for cls in _all_subclasses(errors.CompletableError):
            if f"{cls.__module__}:{cls.__qualname__}" == type_name:
                err = cls.__new__(cls)
                Exception.__init__(err, message)
                assert isinstance(err, errors.CompletableError)
                err.message, err.code, err.details = message, code, dict(details)
                return err
        fallback = errors.CompletableError(message, code, **details)
        fallback.original_type = type_name  # type: ignore[attr-defined]
        return fallback


def describe_error(
    err: BaseException,
    kind: ErrorKind,
    marshaler: ErrorMarshaler | None = None,
    *,
    limit: int = 8000,
) -> str:
    """JSON description of an error as recorded in the database."""
    cls = type(err)
    extra: dict[str, str] = {}
    if marshaler is not None:
        data = marshaler.marshal_completable_error(err)
        if data is not None:
            extra["marshaled"] = base64.b64encode(data).decode()
    extra["traceback"] = format_traceback(err)[-limit:]
    return error_record(kind, f"{cls.__module__}.{cls.__qualname__}", str(err), **extra)


_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def _has_group(err: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if isinstance(current, BaseExceptionGroup):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def format_traceback(err: BaseException) -> str:
    """The traceback as Python prints it, chained exceptions included, without the ``^^^``
    position markers: those make the standard formatter parse the source of every frame, which
    cost more than the rest of a failing activity call (business errors are frequent)."""
    if _has_group(err):
        # Exception groups print as trees; rare enough for the standard formatter.
        return "".join(traceback.format_exception(err))
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = err
    joiner = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, joiner))
        if current.__cause__ is not None:
            current, joiner = current.__cause__, _CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, joiner = current.__context__, _CONTEXT
        else:
            current = None
    parts: list[str] = []
    for exc, joined_by in reversed(chain):
        tb = exc.__traceback__
        if tb is not None:
            parts.append("Traceback (most recent call last):\n")
        while tb is not None:
            frame = tb.tb_frame
            code = frame.f_code
            parts.append(f'  File "{code.co_filename}", line {tb.tb_lineno}, in {code.co_name}\n')
            linecache.lazycache(code.co_filename, frame.f_globals)  # sources in zips, too
            line = linecache.getline(code.co_filename, tb.tb_lineno or 0).strip()
            if line:
                parts.append(f"    {line}\n")
            tb = tb.tb_next
        parts.extend(_exception_only(exc))
        parts.append(joined_by)
    return "".join(parts)


def _exception_only(exc: BaseException) -> list[str]:
    """The last line(s) of a traceback, as ``traceback.format_exception_only`` writes them; built
    directly for the usual exception (the standard formatter's ``TracebackException`` cost as
    much as the rest of a failed attempt's record). The standard formatter still writes those
    it adds to: syntax errors, exceptions with notes, and the name errors that Python 3.12+
    extends with "Did you mean" suggestions."""
    cls = type(exc)
    if issubclass(cls, _STANDARD_FORMAT):
        return traceback.format_exception_only(cls, exc)
    try:
        notes = getattr(exc, "__notes__", None)
    except Exception:
        notes = None  # unreadable notes are left out (the standard formatter raises, or says so)
    if notes is not None:
        return traceback.format_exception_only(cls, exc)
    name, module = cls.__qualname__, cls.__module__
    if module not in ("__main__", "builtins"):
        name = f"{module if isinstance(module, str) else '<unknown>'}.{name}"
    try:
        text = str(exc)
    except BaseException:  # as the standard formatter: any failure of __str__ is reported
        text = "<exception str() failed>"
    return [f"{name}: {text}\n" if text else f"{name}\n"]


_STANDARD_FORMAT = (SyntaxError, NameError, AttributeError, ImportError)


def error_from_record(text: str, marshaler: ErrorMarshaler) -> BaseException:
    """Rebuild a recorded completable error."""
    if text.startswith(_sealed.SEALED_PREFIX):
        raise _sealed.sealed_error(text, "error record")
    record = _error_record(text)
    if record is None:
        raise errors.PayloadError(
            f"the recorded error is not the JSON Sagaway writes ({text[:200]!r}); the row was "
            "altered outside Sagaway: repair it, or start the workflow anew"
        )
    data = record.get("marshaled")
    if data is not None:
        try:
            raw = base64.b64decode(data, validate=True)
        except (ValueError, TypeError):
            raise errors.PayloadError(
                f"the recorded error's marshaled data is not base64 ({str(data)[:200]!r}); the "
                "row was altered outside Sagaway"
            ) from None
        return marshaler.unmarshal_completable_error(raw)
    if record.get("kind") == ErrorKind.CANCELLED:
        return errors.WorkflowCancelled("", "CANCELLED", str(record.get("message", "")))
    return errors.CompletableError(str(record.get("message", "")))


def _error_record(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def error_summary(text: str | None) -> dict[str, Any] | None:
    """The recorded error as a dict (for describe()).

    A record that is not Sagaway's JSON (altered outside it) is described, not raised: one bad
    row must not stop ``describe()`` or ``sagaway show`` from printing the rest.
    """
    if text is None:
        return None
    if text.startswith(_sealed.SEALED_PREFIX):
        return {
            "kind": ErrorKind.UNREADABLE.value,
            "type": _sealed.SEALED_MARKER,
            "message": _sealed.note(text),
        }
    data = _error_record(text)
    if data is None:
        return {
            "kind": ErrorKind.UNREADABLE.value,
            "type": "sagaway.CorruptRecord",
            "message": f"the recorded error is not valid Sagaway JSON: {text[:200]!r}",
        }
    return data
