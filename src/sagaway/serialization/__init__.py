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

The package's modules: ``_payloads`` (JSON by annotation and its checks), ``_codec`` (a
function's arguments and result), ``_error_records`` (errors as recorded) and ``_tracebacks``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sagaway.serialization._error_records import DefaultErrorMarshaler as DefaultErrorMarshaler
from sagaway.serialization._error_records import ErrorMarshaler as ErrorMarshaler
from sagaway.serialization._error_records import describe_error as describe_error
from sagaway.serialization._error_records import error_from_record as error_from_record
from sagaway.serialization._error_records import error_summary as error_summary
from sagaway.serialization._error_records import round_of as round_of
from sagaway.serialization._error_records import with_round as with_round
from sagaway.serialization._payloads import DEFAULT_PAYLOAD_LIMIT as DEFAULT_PAYLOAD_LIMIT
from sagaway.serialization._payloads import MAX_DEPTH as MAX_DEPTH
from sagaway.serialization._payloads import args_hash as args_hash
from sagaway.serialization._payloads import encode_value as encode_value
from sagaway.serialization._payloads import explain as explain
from sagaway.serialization._payloads import load_json as load_json
from sagaway.serialization._tracebacks import _exception_only as _exception_only
from sagaway.serialization._tracebacks import format_traceback as format_traceback

if TYPE_CHECKING:
    from sagaway.serialization._codec import FunctionCodec as FunctionCodec


def __getattr__(name: str) -> Any:
    """``FunctionCodec`` on first use: it imports pydantic, which reading stored JSON (the
    ``sagaway list`` and ``show`` reads) does without."""
    if name == "FunctionCodec":
        from sagaway.serialization._codec import FunctionCodec

        return FunctionCodec
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
