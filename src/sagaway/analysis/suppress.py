"""Inline suppressions: ``# sagaway: ignore[SW101]`` or ``# sagaway: ignore`` on the line.

Comments are found with ``tokenize``, so the text inside a string literal never suppresses
anything. Codes may be prefixes (``ignore[SW1]``) and several may be listed, comma-separated.
"""

from __future__ import annotations

import io
import re
import tokenize

_DIRECTIVE = re.compile(r"#\s*sagaway:\s*ignore\b(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE)

Suppressions = dict[int, frozenset[str] | None]
"""Line -> codes suppressed there (None: every code)."""


def parse_suppressions(source: str) -> Suppressions:
    """The suppression comments of a module, by line."""
    comments: list[tuple[int, str]] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                comments.append((token.start[0], token.string))
    except (tokenize.TokenError, SyntaxError):
        # Unparseable source: fall back to a line scan (at worst a string suppresses).
        comments = [(n, line) for n, line in enumerate(source.splitlines(), 1) if "#" in line]
    found: Suppressions = {}
    for line, text in comments:
        for match in _DIRECTIVE.finditer(text):
            codes = match.group("codes")
            if codes is None:
                found[line] = None
                continue
            parsed = frozenset(c.strip().upper() for c in re.split(r"[,\s]+", codes) if c.strip())
            previous = found.get(line, frozenset())
            if previous is not None:
                found[line] = previous | parsed
    return found


def is_suppressed(suppressions: Suppressions, line: int, code: str) -> bool:
    """Whether ``code`` reported at ``line`` is suppressed by a comment on that line."""
    if line not in suppressions:
        return False
    codes = suppressions[line]
    return codes is None or any(code.startswith(c) for c in codes)
