"""What workflow keys and names may hold: text every database can store, of bounded length,
with no control characters.

Keys and names are printed by ``sagaway list`` and ``show`` and written into logs: a control
character in one (ESC starting a terminal sequence, CR or LF starting a spoofed row, an OSC 8
hyperlink) would act on the operator's terminal. They are refused at every way in: a start, a
signal, a registration, a schedule, the Engine Server's requests. The C0 controls
(U+0000-U+001F, tab and newline included), DEL (U+007F) and the C1 controls (U+0080-U+009F)
are refused; the CLI also escapes them when it prints rows stored before this check.
"""

from __future__ import annotations

MAX_KEY = 512
"""Characters in a workflow key (idempotency, concurrency, schedule id)."""
MAX_NAME = 200
"""Characters in a workflow, activity or signal name, or a change id."""


def is_control(char: str) -> bool:
    """Whether ``char`` is a C0 control, DEL or a C1 control."""
    code = ord(char)
    return code < 0x20 or 0x7F <= code <= 0x9F


ESCAPES = {
    c: {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}.get(c, f"\\x{c:02x}")
    for c in (*range(0x20), *range(0x7F, 0xA0))
}
"""``str.translate`` table writing each control character as its escape (``\\n``, ``\\x1b``)."""


def escape_controls(value: str) -> str:
    """``value`` on one line, every control character written as its escape."""
    return value.translate(ESCAPES)


def control_position(value: str) -> int | None:
    """The index of the first control character in ``value``, None when it has none."""
    for index, char in enumerate(value):
        if is_control(char):
            return index
    return None


def check_text(value: str, what: str) -> None:
    """Refuse a key or name that a database cannot store as text (``ValueError``)."""
    if "\x00" in value:
        raise ValueError(f"{what} must not contain NUL characters (\\x00): {value!r}")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise ValueError(
                f"{what} must be valid Unicode (no lone surrogates such as '\\ud800'): {value!r}"
            ) from None


def check_plain(value: str, what: str) -> None:
    """Refuse ``value`` when a database cannot store it or it holds a control character."""
    check_text(value, what)
    position = control_position(value)
    if position is not None:
        raise ValueError(
            f"{what} must not contain control characters (U+0000-U+001F, U+007F-U+009F): "
            f"{value[position]!r} at position {position} of {value!r}"
        )


def check_key(key: str, what: str) -> None:
    """Refuse a workflow key that is empty, too long, not storable or holds a control
    character (``ValueError``)."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"{what} must be a non-empty string")
    if len(key) > MAX_KEY:
        raise ValueError(f"{what} must be at most {MAX_KEY} characters (it has {len(key)})")
    check_plain(key, what)


def check_name(name: str, what: str) -> None:
    """Refuse a workflow, activity or signal name that is empty, longer than ``MAX_NAME``,
    not storable or holds a control character (``ValueError``)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} must be a non-empty string")
    if len(name) > MAX_NAME:
        raise ValueError(f"{what} must be at most {MAX_NAME} characters (it has {len(name)})")
    check_plain(name, what)
