"""The JSON parameter of PostgreSQL's batched statements (``json_to_recordset``)."""

from __future__ import annotations

import json
import math

import pytest

from sagaway.store.postgres.conn import json_batch


def test_a_batch_reads_back_as_its_rows_floats_exactly() -> None:
    rows = [
        {"run_id": '0193a-é"\\', "now": 1764658000.123456, "n": 3, "error": None, "ok": True},
        {"run_id": "x", "now": 5e-324, "n": -1, "error": "line\nbreak", "ok": False},
        {"run_id": "y", "now": 1.2345678901234568e17, "n": 0, "error": "\u2028", "ok": True},
    ]
    assert json.loads(json_batch(rows)) == rows


def test_the_words_nan_and_infinity_in_a_text_are_kept() -> None:
    rows = [{"result": '"NaN"', "error": "Infinity and beyond", "now": 1.5}]
    assert json.loads(json_batch(rows)) == rows


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_float_is_refused_so_the_batch_goes_item_by_item(value: float) -> None:
    with pytest.raises(ValueError):
        json_batch([{"run_id": "x", "now": value}])
