"""Small modules with one job: no hand-written module of the package over 700 lines (of the
stores, the Engine Server and the codec store over 500), and no function of the engine, the
stores, the server or the codecs over 60 (generated protocol code aside)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "sagaway"
MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 60
MAX_STORE_MODULE_LINES = 500
STORE_SIDE = ("store", "server", "codecs/_store.py")
"""The storage seam: the store contract, its three dialects, the server and the codec store."""


def _modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "v1" not in p.relative_to(PACKAGE).parts]


def test_no_module_is_over_700_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"split these modules: {long}"


def test_no_store_or_server_module_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for part in STORE_SIDE
        for p in ([PACKAGE / part] if part.endswith(".py") else (PACKAGE / part).rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_STORE_MODULE_LINES
    }
    assert not long, f"split these modules: {long}"


def test_no_engine_or_store_function_is_over_60_lines() -> None:
    long = {}
    for folder in ("_engine", "store", "server", "codecs"):
        for path in (PACKAGE / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long[f"{path.relative_to(PACKAGE)}:{node.name}"] = lines
    assert not long, f"split these functions: {long}"
