from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from decimal import Decimal
from typing import Any

import pydantic
import pytest

import sagaway as sw
from sagaway.serialization import DefaultErrorMarshaler, FunctionCodec, args_hash


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Item:
    sku: str
    price: Decimal


class Model(pydantic.BaseModel):
    when: datetime.datetime
    ids: list[uuid.UUID]


def fn(
    item: Item, model: Model, color: Color, *rest: int, flag: bool = False, **extra: str
) -> Item:
    return item


def test_arguments_round_trip_by_annotation() -> None:
    codec = FunctionCodec(fn, "activity 'fn'")
    item = Item("a", Decimal("1.10"))
    model = Model(when=datetime.datetime(2026, 1, 1, 12), ids=[uuid.UUID(int=1)])
    text = codec.encode_args((item, model, Color.RED, 1, 2), {"flag": True, "note": "x"}, 10_000)
    args, kwargs = codec.decode_args(text)
    assert args == [item, model, Color.RED, 1, 2]
    assert kwargs == {"flag": True, "note": "x"}
    assert codec.decode_result(codec.encode_result(item, 10_000)) == item


def test_positional_and_keyword_calls_hash_the_same() -> None:
    codec = FunctionCodec(fn, "fn")
    item, model = Item("a", Decimal(1)), Model(when=datetime.datetime(2026, 1, 1), ids=[])
    a = codec.encode_args((item, model, Color.RED), {}, 10_000)
    b = codec.encode_args((), {"color": Color.RED, "model": model, "item": item}, 10_000)
    assert args_hash(a) == args_hash(b)


def test_unserialisable_and_oversized_payloads() -> None:
    def takes(x: Any) -> None: ...

    codec = FunctionCodec(takes, "workflow 'takes'")
    with pytest.raises(sw.PayloadError, match="argument 'x' of workflow 'takes'"):
        codec.encode_args((object(),), {}, 10_000)
    with pytest.raises(sw.PayloadError, match="payload limit"):
        codec.encode_args(("é" * 3000,), {}, 4096)


def test_stored_arguments_that_no_longer_fit_are_a_payload_error() -> None:
    codec = FunctionCodec(fn, "fn")
    with pytest.raises(sw.PayloadError, match="no longer has"):
        codec.decode_args('{"gone": 1}')
    with pytest.raises(sw.PayloadError, match="does not match"):
        codec.decode_args('{"item": {"sku": "a"}}')
    with pytest.raises(sw.PayloadError, match="not valid JSON"):
        codec.decode_args("{")


class OutOfStock(sw.CompletableError):
    """Nothing left."""


def test_default_marshaler_rebuilds_known_classes_only() -> None:
    marshaler = DefaultErrorMarshaler()
    data = marshaler.marshal_completable_error(OutOfStock("sold out", code="OOS", sku="x"))
    assert data is not None
    err = marshaler.unmarshal_completable_error(data)
    assert type(err) is OutOfStock and err.code == "OOS" and err.details == {"sku": "x"}
    assert marshaler.marshal_completable_error(ValueError("x")) is None
    forged = b'{"type": "os:system", "message": "m", "code": null, "details": {}}'
    rebuilt = marshaler.unmarshal_completable_error(forged)
    assert type(rebuilt) is sw.CompletableError  # never imports or evaluates stored names
    assert rebuilt.original_type == "os:system"  # type: ignore[attr-defined]


def _raise_inner() -> None:
    raise ValueError("inner")


def _raise_caused() -> None:
    try:
        _raise_inner()
    except ValueError as exc:
        raise KeyError("outer") from exc


def _raise_during_handling() -> None:
    try:
        _raise_caused()
    except KeyError:
        {}["missing"]  # raises while handling the KeyError


def test_recorded_traceback_is_pythons_without_position_markers() -> None:
    import json
    import traceback

    from sagaway import serialization

    try:
        _raise_during_handling()
    except KeyError as exc:
        error = exc
    standard = "".join(traceback.format_exception(error))
    without_markers = "".join(
        line
        for line in standard.splitlines(keepends=True)
        if not (line.strip() and set(line.strip()) <= set("^~"))
    )
    assert serialization.format_traceback(error) == without_markers
    assert "During handling" in without_markers and "direct cause" in without_markers
    recorded = json.loads(serialization.describe_error(error, "error"))
    assert recorded["traceback"] == without_markers
    assert recorded["type"] == "builtins.KeyError" and recorded["message"] == "'missing'"
