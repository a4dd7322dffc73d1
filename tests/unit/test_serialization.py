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


def quote(sku: str, qty: int = 1, discount: int = 0, *, note: str = "") -> str:
    return f"{sku}x{qty}-{discount}{note}"


def test_arguments_stored_by_name_bind_in_the_signatures_order() -> None:
    # A client that knows the workflow by name only stores its arguments as given: in any
    # order, defaults left out. They must reach the same parameters all the same.
    codec = FunctionCodec(quote, "quote")
    args, kwargs = codec.decode_args('{"discount": 5, "note": "!", "sku": "tea"}')
    assert quote(*args, **kwargs) == "teax1-5!"
    args, kwargs = codec.decode_args('{"qty": 3, "sku": "mug"}')
    assert (args, kwargs) == (["mug", 3], {})
    assert quote(*args, **kwargs) == "mugx3-0"


def test_a_positional_only_argument_after_a_left_out_one_is_a_payload_error() -> None:
    def f(a: int = 1, b: int = 2, /) -> int:
        return a + b

    with pytest.raises(sw.PayloadError, match="leave out a positional"):
        FunctionCodec(f, "f").decode_args('{"b": 3}')


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


class _UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


class _NotedError(Exception):
    pass


def _exceptions_of_every_shape() -> list[BaseException]:
    noted = _NotedError("with a note")
    noted.add_note("first note\nsecond line")
    main_error = type("MainError", (Exception,), {"__module__": "__main__"})("from __main__")
    return [
        ValueError("plain"),
        KeyError("key"),
        RuntimeError(),  # no message: the name alone
        ValueError(""),
        _UnprintableError("x"),
        noted,
        main_error,
        SyntaxError("bad syntax", ("f.py", 3, 5, "x = = 1\n")),
        KeyboardInterrupt(),
        _attribute_error(),  # Python 3.12+ adds "Did you mean"
        _name_error(),
        _BaseFailingStrError("x"),
    ]


class _ErrorWithFailingNotes(Exception):
    @property
    def __notes__(self) -> list[str]:
        raise RuntimeError("no notes")


class _BaseFailingStrError(Exception):
    def __str__(self) -> str:
        raise KeyboardInterrupt


def test_an_error_whose_notes_cannot_be_read_is_recorded_without_them() -> None:
    from sagaway import serialization

    error = _ErrorWithFailingNotes("notes cannot be read")
    assert serialization._exception_only(error) == [
        f"{__name__}._ErrorWithFailingNotes: notes cannot be read\n"
    ]


def _attribute_error() -> AttributeError:
    class Order:
        total = 1

    try:
        Order().totl  # type: ignore[attr-defined]  # noqa: B018 - the error is the point
    except AttributeError as exc:
        return exc
    raise AssertionError("no AttributeError")


def _name_error() -> NameError:
    try:
        exec("print(os.getcwd())", {})  # a module that was not imported
    except NameError as exc:
        return exc
    raise AssertionError("no NameError")


@pytest.mark.parametrize("error", _exceptions_of_every_shape(), ids=lambda e: type(e).__name__)
def test_the_last_line_of_a_recorded_traceback_is_pythons(error: BaseException) -> None:
    import traceback

    from sagaway import serialization

    try:
        raise error
    except BaseException as exc:  # every shape, KeyboardInterrupt included
        caught = exc
    standard = traceback.format_exception_only(type(caught), caught)
    assert serialization._exception_only(caught) == standard
    assert serialization.format_traceback(caught).endswith("".join(standard))


# --------------------------------------------------------------- what can be stored is readable


def _nested(depth: int, inner: Any, *, as_dict: bool = False) -> Any:
    value = inner
    for _ in range(depth):
        value = {"a": value} if as_dict else [value]
    return value


@pytest.mark.parametrize("as_dict", [False, True])
@pytest.mark.parametrize("inner", [1, [], "x"])
def test_whatever_deep_payload_is_accepted_can_be_read_back(inner: Any, as_dict: bool) -> None:
    from sagaway import serialization

    def takes(x: Any) -> Any: ...

    codec = FunctionCodec(takes, "workflow 'takes'")
    accepted = 0
    for depth in range(190, 300):
        value = _nested(depth, inner, as_dict=as_dict)
        for encode, decode in (
            (lambda v: codec.encode_args((v,), {}, 10_000_000), codec.decode_args),
            (lambda v: codec.encode_result(v, 10_000_000), codec.decode_result),
            (lambda v: serialization.encode_value(v, "signal"), _decode_any),
        ):
            try:
                text = encode(value)
            except sw.PayloadError as exc:
                assert "nested too deeply" in str(exc) or "depth" in str(exc)
                continue
            decode(text)  # never a PayloadError: what is stored can be decoded again
            accepted += 1
    assert accepted  # the shallower ones are stored


def _decode_any(text: str) -> Any:
    import pydantic_core

    return pydantic_core.from_json(text)


def test_depth_limit_is_the_decoders_200_levels() -> None:
    from sagaway import serialization

    assert serialization.encode_value(_nested(200, 1), "v").count("[") == 200
    with pytest.raises(sw.PayloadError, match=r"nested too deeply.*200 levels"):
        serialization.encode_value(_nested(201, 1), "v")
    # A function's arguments are an object: one level of the 200 is theirs.
    codec = FunctionCodec(lambda x: None, "activity 'a'")
    assert codec.decode_args(codec.encode_args((_nested(199, 1),), {}, 10_000_000)) == (
        [_nested(199, 1)],
        {},
    )
    with pytest.raises(sw.PayloadError, match=r"argument|nested too deeply"):
        codec.encode_args((_nested(200, 1),), {}, 10_000_000)
    # Many brackets but shallow: accepted (the decoder checks it, and it is fine).
    wide = [[i] for i in range(1000)]
    assert codec.decode_args(codec.encode_args((wide,), {}, 10_000_000)) == ([wide], {})


@dataclasses.dataclass
class Reading:
    value: float
    extra: Any = None


class ReadingModel(pydantic.BaseModel):
    value: float


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (Any, NAN),
        (Any, INF),
        (Any, [1.0, -INF]),
        (Any, {"a": NAN}),
        (float, NAN),
        (float, INF),
        (list[float], [0.5, NAN]),
        (dict[str, Any], {"a": INF}),
        (Reading, Reading(NAN)),
        (Reading, Reading(1.0, extra=[INF])),
        (ReadingModel, ReadingModel(value=-INF)),
        (Any, Reading(1.0, extra={"x": NAN})),
    ],
)
def test_nan_and_infinity_are_refused_never_changed(annotation: Any, value: Any) -> None:
    from sagaway import serialization

    def takes(x: Any) -> Any: ...

    takes.__annotations__ = {"x": annotation, "return": annotation}
    codec = FunctionCodec(takes, "activity 'takes'")
    with pytest.raises(sw.PayloadError, match="NaN or Infinity"):
        codec.encode_args((value,), {}, 10_000)
    with pytest.raises(sw.PayloadError, match="NaN or Infinity"):
        codec.encode_result(value, 10_000)
    if annotation is Any:
        with pytest.raises(sw.PayloadError, match="NaN or Infinity"):
            serialization.encode_value(value, "payload of signal 's'")


def test_text_that_spells_nan_round_trips_and_decimal_nan_is_refused() -> None:
    def takes(x: Any, d: Decimal) -> Decimal: ...

    codec = FunctionCodec(takes, "activity 'takes'")
    args = (["NaN", "Infinity", {"NaN": "-Infinity"}], Decimal("1.5"))
    assert codec.decode_args(codec.encode_args(args, {}, 10_000)) == (list(args), {})
    # Written as the string "NaN", which a Decimal annotation refuses to read back.
    for bad in (Decimal("NaN"), Decimal("-Infinity")):
        with pytest.raises(sw.PayloadError, match="could not be read back"):
            codec.encode_args((None, bad), {}, 10_000)
        with pytest.raises(sw.PayloadError, match="could not be read back"):
            codec.encode_result(bad, 10_000)


def test_lone_surrogates_are_a_payload_error_on_every_encode_path() -> None:
    from sagaway import serialization

    def takes(x: Any) -> Any: ...

    codec = FunctionCodec(takes, "activity 'takes'")
    for encode in (
        lambda: codec.encode_args(("a\ud800b",), {}, 10_000),
        lambda: codec.encode_args(({"k\udfff": 1},), {}, 10_000),
        lambda: codec.encode_result(["\ud800"], 10_000),
        lambda: serialization.encode_value("\ud800", "payload of signal 's'"),
    ):
        with pytest.raises(sw.PayloadError, match="valid Unicode"):
            encode()


def test_errors_with_lone_surrogates_are_recorded_and_rebuilt() -> None:
    import json

    from sagaway import serialization

    marshaler = DefaultErrorMarshaler()
    error = OutOfStock("sold \ud800 out", code="OOS")
    text = serialization.describe_error(error, "completable", marshaler)
    assert json.loads(text)["message"].endswith("sold \ud800 out")
    rebuilt = serialization.error_from_record(text, marshaler)
    assert type(rebuilt) is OutOfStock and rebuilt.message == "sold \ud800 out"


@pytest.mark.parametrize("garbage", ["not json {[/x]", "[1, 2]", '"text"', "{"])
def test_unreadable_recorded_errors_are_described_not_raised(garbage: str) -> None:
    from sagaway import serialization

    summary = serialization.error_summary(garbage)
    assert summary is not None and summary["kind"] == "unreadable"
    assert repr(garbage[:20]).strip("'\"")[:5] in summary["message"]
    with pytest.raises(sw.PayloadError, match="recorded error is not the JSON Sagaway writes"):
        serialization.error_from_record(garbage, DefaultErrorMarshaler())


def test_a_payload_that_does_not_fit_is_told_one_line_per_field() -> None:
    codec = FunctionCodec(fn, "workflow 'fn'")
    stored = '{"item": {"sku": "a", "price": "cheap"}, "model": {"ids": ["x"]}, "color": "red"}'
    with pytest.raises(sw.PayloadError) as caught:
        codec.decode_args(stored)
    assert str(caught.value).splitlines() == [
        "stored argument 'item' of workflow 'fn' does not match its annotation (Item):",
        "  price: Input should be a valid decimal (got 'cheap')",
    ]
    with pytest.raises(sw.PayloadError) as caught:
        codec.decode_result('{"sku": 1}')
    assert str(caught.value).splitlines() == [
        "stored result of workflow 'fn' does not match its return annotation (Item):",
        "  sku: Input should be a valid string (got 1)",
        "  price: Field required",
    ]


def test_arguments_given_as_json_are_typed_by_the_annotations() -> None:
    codec = FunctionCodec(fn, "workflow 'fn'")
    model = {"when": "2026-01-01T12:00:00", "ids": [str(uuid.UUID(int=1))]}
    args, kwargs = codec.type_args([{"sku": "a", "price": "1.10"}, model, "red", 1], {"x": "y"})
    assert args == [Item("a", Decimal("1.10")), Model.model_validate(model), Color.RED, 1]
    assert kwargs == {"x": "y"}
    with pytest.raises(sw.PayloadError) as caught:
        codec.type_args([], {"item": {}, "model": {"when": "soon", "ids": []}, "color": "red"})
    assert str(caught.value).splitlines()[1:] == [
        "  sku: Field required",
        "  price: Field required",
    ]

    def takes(order: Item) -> None: ...

    with pytest.raises(TypeError, match=r"^workflow 'takes' has no parameter 'ordr'$"):
        FunctionCodec(takes, "workflow 'takes'").type_args([], {"ordr": {}})


# --------------------------------------------------------------- untyped places: plain JSON only


@dataclasses.dataclass
class Tagged:
    name: str
    meta: dict[str, Any]
    parent: Tagged | None = None


class Envelope(pydantic.BaseModel):
    body: Any
    when: datetime.datetime


def _codec(annotation: Any) -> FunctionCodec:
    def takes(x: Any) -> Any: ...

    takes.__annotations__ = {"x": annotation, "return": annotation}
    return FunctionCodec(takes, "activity 'takes'")


@pytest.mark.parametrize(
    ("annotation", "value", "where"),
    [
        (Any, {1, 2}, "x"),
        (object, b"x", "x"),
        (Any, (1, 2), "x"),
        (Any, [1, {"a": datetime.date(2026, 1, 1)}], "x[1]['a']"),
        (Any, {1: "a"}, "a key of x"),
        (Any, Color.RED, "x"),
        (Any, Item("a", Decimal(1)), "x"),
        (list, [1, (2,)], "x[1]"),
        (list[Any], [uuid.UUID(int=1)], "x[0]"),
        (dict[str, Any], {"k": Decimal("1.5")}, "x['k']"),
        (dict[Any, int], {2: 1}, "a key of x"),
        (tuple[int, Any], (1, {3}), "x[1]"),
        (tuple[Any, ...], (1, b""), "x[1]"),
        (Any | None, (1,), "x"),  # type: ignore[operator]  # Any | None is valid at run time
        (Tagged, Tagged("t", {"at": datetime.datetime(2026, 1, 1)}), "x.meta['at']"),
        (Tagged, Tagged("t", {}, Tagged("p", {"s": {1}})), "x.parent.meta['s']"),
        (Envelope, Envelope(body=(1, 2), when=datetime.datetime(2026, 1, 1)), "x.body"),
    ],
)
def test_values_json_would_change_in_untyped_places_are_refused(
    annotation: Any, value: Any, where: str
) -> None:
    codec = _codec(annotation)
    for encode in (
        lambda: codec.encode_args((value,), {}, 10_000),
        lambda: codec.encode_result(value, 10_000),
    ):
        with pytest.raises(sw.PayloadError, match="cannot be stored unchanged") as raised:
            encode()
        message = str(raised.value)
        shown = where if where.startswith("a key") else f"the value at {where}"
        if "result" in message.split(" cannot")[0]:
            shown = shown.replace("x", "result", 1)
        assert shown in message, message
        assert "Give it its type in the annotation" in message


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (Any, {"a": [1, 2.5, None, True, "s", {"b": []}]}),
        (dict[str, Any], {"k": [1, {"n": None}]}),
        (Tagged, Tagged("t", {"n": 1}, Tagged("p", {}))),
        (set[int], {1, 2}),
        (tuple[int, str], (1, "a")),
        (bytes, b"\x00raw"),
        (datetime.datetime, datetime.datetime(2026, 1, 1, 2, 3)),
        (Decimal, Decimal("12.30")),
        (Color, Color.RED),
        (dict[int, str], {1: "a"}),
        (int | datetime.date, datetime.date(2026, 1, 1)),  # other unions: not looked into
        (Model, Model(when=datetime.datetime(2026, 1, 1), ids=[uuid.UUID(int=3)])),
    ],
)
def test_plain_json_in_untyped_places_and_typed_values_round_trip(
    annotation: Any, value: Any
) -> None:
    codec = _codec(annotation)
    assert codec.decode_args(codec.encode_args((value,), {}, 10_000)) == ([value], {})
    assert codec.decode_result(codec.encode_result(value, 10_000)) == value


def test_untyped_var_arguments_are_checked_per_value_and_signals_are_not() -> None:
    from sagaway import serialization

    def takes(*args, **kwargs) -> None: ...  # type: ignore[no-untyped-def]

    codec = FunctionCodec(takes, "activity 'takes'")
    with pytest.raises(sw.PayloadError, match=r"the value at args\[1\] is a set"):
        codec.encode_args((1, {2}), {}, 10_000)
    with pytest.raises(sw.PayloadError, match=r"the value at kwargs\['k'\] is a tuple"):
        codec.encode_args((), {"k": (1,)}, 10_000)
    # A signal's payload is typed by its receiver (receive(T)), which the sender does not know.
    assert serialization.encode_value(Item("a", Decimal(1)), "signal") == '{"sku":"a","price":"1"}'


def test_a_deep_untyped_value_is_checked_without_recursion() -> None:
    codec = _codec(Any)
    deep: Any = (1,)
    for _ in range(150):
        deep = [deep]
    with pytest.raises(sw.PayloadError, match="is a tuple"):
        codec.encode_args((deep,), {}, 10_000_000)
