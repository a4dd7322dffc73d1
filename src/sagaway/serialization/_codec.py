"""Encoding a function's arguments and result by its annotations (``FunctionCodec``)."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import pydantic
import pydantic_core

from sagaway import _untyped, errors
from sagaway.serialization._payloads import (
    _Adapter,
    _adapter_for,
    _any,
    _dump,
    _read_back,
    _spells_non_finite,
    _why,
    explain,
    load_json,
)

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
