"""Entry points: check a source string, a parsed tree, or files and directories.

Files are analysed together: a durable call of a function defined in another analysed file
is checked against that file's registrations (SW201/SW202). Everything else is per module.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import tokenize
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from sagaway.analysis.agents import check_agents
from sagaway.analysis.calls import check_compensation_arguments, check_unawaited
from sagaway.analysis.determinism import check_determinism
from sagaway.analysis.durable import check_broad_except, check_registrations, check_sagas
from sagaway.analysis.finding import Finding
from sagaway.analysis.idempotency import check_idempotency
from sagaway.analysis.index import ModuleIndex, ProjectIndex
from sagaway.analysis.patches import check_patches
from sagaway.analysis.rules import is_selected, parse_codes
from sagaway.analysis.state import check_module_state
from sagaway.analysis.suppress import Suppressions, is_suppressed, parse_suppressions

CodeSpec = str | Sequence[str] | None
"""Rule codes or prefixes: ``"SW101,SW2"`` or ``["SW101", "SW2"]``."""

#: Directories never walked into: environments, caches, build output, VCS metadata.
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        "node_modules",
        "build",
        "dist",
        "site-packages",
    }
)


@dataclasses.dataclass(frozen=True)
class LintReport:
    """Findings, and what was analysed (for summaries and false-positive rates)."""

    findings: list[Finding]
    files: int
    workflows: int
    activities: int


@dataclasses.dataclass
class _Parsed:
    path: str
    module: ModuleIndex | None
    source: str | None = None
    error: Finding | None = None
    _suppressions: Suppressions | None = None

    @property
    def suppressions(self) -> Suppressions:
        """Parsed on first use: most files have no findings and need no tokenizing."""
        if self._suppressions is None:
            self._suppressions = parse_suppressions(self.source) if self.source else {}
        return self._suppressions


def _parse(source: str, path: str) -> _Parsed:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. SyntaxWarning for invalid escapes
            tree = ast.parse(source, filename=path, type_comments=False)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        col = getattr(exc, "offset", None) or 1
        message = getattr(exc, "msg", None) or str(exc)
        error = Finding(path, line, col, "SW000", f"cannot parse: {message}; fix the syntax")
        return _Parsed(path, None, error=error)
    return _Parsed(path, ModuleIndex(tree, path), source)


def _module_findings(parsed: _Parsed, project: ProjectIndex) -> Iterator[Finding]:
    module = parsed.module
    if module is None:
        if parsed.error is not None:
            yield parsed.error
        return
    raws = [
        *check_determinism(module),
        *check_registrations(module, project),
        *check_unawaited(module, project),
        *check_idempotency(module),
        *check_sagas(module),
        *check_compensation_arguments(module, project),
        *check_broad_except(module, project),
        *check_module_state(module),
        *check_patches(module),
        *check_agents(module),
    ]
    seen: set[tuple[int, int, str]] = set()
    for node, code, message in raws:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0) + 1
        if (line, col, code) in seen or is_suppressed(parsed.suppressions, line, code):
            continue
        seen.add((line, col, code))
        yield Finding(module.path, line, col, code, message)


def _run(
    parsed: list[_Parsed], select: CodeSpec, ignore: CodeSpec
) -> tuple[list[Finding], ProjectIndex]:
    selected, ignored = parse_codes(select), parse_codes(ignore)
    project = ProjectIndex([p.module for p in parsed if p.module is not None])
    findings = [
        finding
        for p in parsed
        for finding in _module_findings(p, project)
        if is_selected(finding.code, selected, ignored)
    ]
    return sorted(findings), project


def check_source(
    source: str, filename: str = "<string>", *, select: CodeSpec = None, ignore: CodeSpec = None
) -> list[Finding]:
    """Check one module's source text. Raises ValueError for an unknown code in select/ignore."""
    findings, _ = _run([_parse(source, filename)], select, ignore)
    return findings


def check_tree(
    tree: ast.Module, filename: str, lines: Sequence[str] | None = None
) -> list[Finding]:
    """Check an already parsed module (the flake8 plugin's entry); ``lines`` for suppressions."""
    source = "".join(lines) if lines is not None else None
    parsed = _Parsed(filename, ModuleIndex(tree, filename), source)
    findings, _ = _run([parsed], None, None)
    return findings


def iter_python_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files named on the command line, and ``*.py`` files under directories, sorted.

    A file named explicitly is checked whatever its suffix. Raises FileNotFoundError for a
    path that does not exist.
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
                files.extend(Path(root, n) for n in sorted(names) if n.endswith(".py"))
        elif path.exists():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such file or directory: {raw}")
    unique: dict[Path, None] = dict.fromkeys(files)
    return list(unique)


def _read(path: Path) -> _Parsed:
    try:
        with tokenize.open(path) as handle:  # honours PEP 263 encoding declarations
            source = handle.read()
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        error = Finding(str(path), 1, 1, "SW000", f"cannot read: {exc}")
        return _Parsed(str(path), None, error=error)
    return _parse(source, str(path))


def lint_paths(
    paths: Iterable[str | os.PathLike[str]], select: CodeSpec = None, ignore: CodeSpec = None
) -> LintReport:
    """Check files and directories together; findings plus counts of what was analysed."""
    parsed = [_read(path) for path in iter_python_files(paths)]
    findings, _ = _run(parsed, select, ignore)
    modules = [p.module for p in parsed if p.module is not None]
    return LintReport(
        findings=findings,
        files=len(parsed),
        workflows=sum(len(m.workflows) for m in modules),
        activities=sum(len(m.activities) for m in modules),
    )


def check_paths(
    paths: Iterable[str | os.PathLike[str]], select: CodeSpec = None, ignore: CodeSpec = None
) -> list[Finding]:
    """Check files and directories (``*.py`` under directories); findings sorted by place."""
    return lint_paths(paths, select, ignore).findings
