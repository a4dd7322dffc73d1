"""``_Adapter`` calls pydantic-core directly once its adapters are built: the same values and
the same errors as pydantic's ``TypeAdapter`` wrappers, on every call after the first."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
import warnings
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pydantic
import pytest

from sagaway.serialization._payloads import _SERIALISE_CONFIG, _Adapter


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: float


class Order(pydantic.BaseModel):
    id: str
    lines: list[int]


CASES: list[tuple[Any, Any]] = [
    (int, 7),
    (int, True),
    (str, "é"),
    (float, 1.5),
    (float, float("inf")),
    (bool, False),
    (Any, {"a": [1, 2.5, None, "x"]}),
    (dict[str, Any], {"n": Decimal("1.10")}),
    (list[int], [1, 2, 3]),
    (datetime.datetime, datetime.datetime(2026, 12, 6, 1, 2, 3, tzinfo=datetime.UTC)),
    (uuid.UUID, uuid.UUID(int=5)),
    (Colour, Colour.RED),
    (Point, Point(1, 2.0)),  # a dataclass: dumped through list[Point]
    (Order, Order(id="o-1", lines=[1])),  # a model: dumped through list[Order]
    (int | None, None),
]


def _reference_dump(annotation: Any, value: Any) -> Any:
    try:
        return pydantic.TypeAdapter(annotation, config=_SERIALISE_CONFIG).dump_python(
            value, mode="json"
        )
    except pydantic.PydanticUserError:
        wrapped = pydantic.TypeAdapter(list[annotation], config=_SERIALISE_CONFIG)
        return wrapped.dump_python([value], mode="json")[0]


@pytest.mark.parametrize(("annotation", "value"), CASES)
def test_dumps_and_validates_as_pydantics_wrappers_on_every_call(
    annotation: Any, value: Any
) -> None:
    adapter = _Adapter(annotation)
    expected = _reference_dump(annotation, value)
    dumped = [adapter.dump_python(value) for _ in range(3)]  # the first builds, then direct
    assert dumped == [expected] * 3
    assert adapter._to_python is not None  # the direct call was taken
    reference = pydantic.TypeAdapter(annotation).validate_python(expected)
    assert [adapter.validate_python(expected) for _ in range(3)] == [reference] * 3
    assert adapter._validated is not None


def _outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    """What ``call`` did: its value or its exception, and the warnings it gave."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            done: tuple[Any, ...] = ("value", call())
        except Exception as exc:
            done = ("raised", type(exc), str(exc).splitlines()[0])
    return (*done, [str(w.message).splitlines()[0] for w in seen])


@pytest.mark.parametrize(
    ("annotation", "wrong"), [(int, "not a number"), (Point, object()), (list[int], [1, "x"])]
)
def test_wrong_values_fail_as_with_pydantics_wrappers(annotation: Any, wrong: Any) -> None:
    adapter = _Adapter(annotation)
    good = {int: 1, Point: Point(1, 2.0), list[int]: [1]}[annotation]
    adapter.dump_python(good)
    adapter.validate_python(adapter.dump_python(good))
    assert adapter._to_python is not None and adapter._validated is not None
    assert _outcome(lambda: adapter.dump_python(wrong)) == _outcome(
        lambda: _reference_dump(annotation, wrong)
    )
    assert _outcome(lambda: adapter.validate_python(wrong)) == _outcome(
        lambda: pydantic.TypeAdapter(annotation).validate_python(wrong)
    )
