"""`sagaway lint`: every corpus file yields exactly the findings its `# expect:` comments name.

The corpus (tests/lint/corpus/) holds bad snippets, each offending line annotated with
`# expect: SWxxx[, SWyyy]`, and good snippets full of near misses that must stay silent. The
project's own examples must lint clean: a finding there is a false positive to fix.
"""

from __future__ import annotations

import ast
import collections
import json
import re
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from sagaway.analysis import RULES, Finding, check_paths, check_source, lint_paths
from sagaway.analysis.flake8_plugin import SagawayChecker
from sagaway.analysis.suppress import is_suppressed, parse_suppressions
from sagaway.cli.lint import lint

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
CORPUS_FILES = sorted(CORPUS.glob("*.py"))
EXPECT = re.compile(r"#.*\bexpect:\s*(?P<codes>SW\d{3}(?:\s*,\s*SW\d{3})*)")
PROJECT_EXAMPLES = [
    ROOT / "src" / "sagaway" / "demo",
    ROOT / "examples",
    ROOT / "tests" / "acceptance" / "crash_app.py",
]


def expected_findings(path: Path) -> collections.Counter[tuple[int, str]]:
    """(line, code) pairs from the file's `# expect:` comments."""
    expected: collections.Counter[tuple[int, str]] = collections.Counter()
    for number, line in enumerate(path.read_text().splitlines(), 1):
        match = EXPECT.search(line)
        if match:
            for code in re.split(r"\s*,\s*", match.group("codes")):
                expected[(number, code)] += 1
    return expected


def actual_findings(findings: list[Finding]) -> collections.Counter[tuple[int, str]]:
    return collections.Counter((f.line, f.code) for f in findings)


@pytest.fixture(scope="module")
def corpus_findings() -> dict[str, list[Finding]]:
    """The whole corpus checked in one run (so cross-file calls resolve), grouped by file."""
    grouped: dict[str, list[Finding]] = {str(path): [] for path in CORPUS_FILES}
    for finding in check_paths([CORPUS]):
        grouped.setdefault(finding.path, []).append(finding)
    return grouped


# ---------------------------------------------------------------------------- the corpus


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_corpus_file_has_exactly_the_expected_findings(
    path: Path, corpus_findings: dict[str, list[Finding]]
) -> None:
    expected = expected_findings(path)
    actual = actual_findings(corpus_findings[str(path)])
    if path.name.startswith("bad_"):
        assert expected, f"{path.name} is a bad snippet without `# expect:` annotations"
    if path.name.startswith("good_"):
        assert not expected
    missing = expected - actual
    unexpected = actual - expected
    assert not missing and not unexpected, (
        f"missing: {sorted(missing.elements())}, unexpected: "
        + "; ".join(
            f.format() for f in corpus_findings[str(path)] if (f.line, f.code) in unexpected
        )
    )


def test_corpus_covers_every_rule() -> None:
    covered = {code for path in CORPUS_FILES for (_, code) in expected_findings(path)}
    assert covered == set(RULES) - {"SW000"}


@pytest.mark.parametrize(
    "path", [p for p in CORPUS_FILES if p.name != "bad_cross_calls.py"], ids=lambda p: p.name
)
def test_single_file_check_matches_the_corpus_run(
    path: Path, corpus_findings: dict[str, list[Finding]]
) -> None:
    assert check_source(path.read_text(), str(path)) == corpus_findings[str(path)]


def test_cross_file_call_needs_the_defining_file() -> None:
    calls = CORPUS / "bad_cross_calls.py"
    assert check_source(calls.read_text(), str(calls)) == []
    both = check_paths([calls, CORPUS / "cross_defs.py"])
    assert [(f.path, f.line, f.code) for f in both] == [
        (str(calls), 14, "SW201"),
        (str(calls), 15, "SW203"),
        (str(calls), 17, "SW402"),
    ]


def test_registration_by_call_in_another_file(tmp_path: Path) -> None:
    (tmp_path / "steps.py").write_text(
        "async def ship(order: str) -> str:\n    return order\n\n\n"
        "async def flow(order: str) -> None:\n"
        "    await manager.activity(ship, order).execute_get()\n"
    )
    (tmp_path / "wiring.py").write_text(
        "from steps import ship\nfrom app import manager\n\nmanager.register_activity(ship)\n"
    )
    assert check_paths([tmp_path / "steps.py"])[0].code == "SW201"  # alone: looks unregistered
    assert check_paths([tmp_path]) == []


def test_findings_say_what_to_do_instead(corpus_findings: dict[str, list[Finding]]) -> None:
    findings = [f for group in corpus_findings.values() for f in group]
    assert findings
    verbs = "use|move|put|pass|get|draw|read|iterate|catch|compensate|decorate|register|call|start"
    advice = re.compile(rf"\b({verbs}|never)\b")
    for finding in findings:
        assert advice.search(finding.message), finding.format()


# ---------------------------------------------------------------------------- the project


def test_project_examples_lint_clean() -> None:
    report = lint_paths(PROJECT_EXAMPLES)
    assert [f.format() for f in report.findings] == []
    # Not vacuous: the examples' workflows and activities were recognised and analysed.
    assert report.workflows >= 3
    assert report.activities >= 10


# ---------------------------------------------------------------------------- rule details


def lint_snippet(source: str) -> list[tuple[int, str]]:
    return [(f.line, f.code) for f in check_source(textwrap.dedent(source), "snippet.py")]


def test_local_names_shadow_modules_and_builtins() -> None:
    source = """
        import time
        import sagaway as sw
        manager = sw.Manager()

        @manager.register_workflow
        async def flow(time: float, open: str) -> float:
            hash = len
            return time + hash(open)
    """
    assert lint_snippet(source) == []


def test_from_imports_aliases_and_function_level_imports_resolve() -> None:
    source = """
        from time import time as now
        import sagaway as sw
        manager = sw.Manager()

        @manager.register_workflow
        async def flow() -> float:
            import random
            return now() + random.random()
    """
    assert lint_snippet(source) == [(9, "SW101"), (9, "SW102")]


def test_registration_by_call_and_by_imported_decorator_name() -> None:
    source = """
        import time
        from app import manager
        register_workflow = manager.register_workflow

        async def _flow() -> float:
            return time.time()

        flow = manager.register_workflow(name="flow")(_flow)

        @register_workflow
        async def other() -> None:
            await manager.workflow(flow).execute()
            await manager.workflow(_flow).execute()
    """
    assert lint_snippet(source) == [(7, "SW101")]


def test_functions_that_are_not_workflows_may_do_anything() -> None:
    source = """
        import random, time, os
        import sagaway as sw
        manager = sw.Manager()

        @manager.register_activity
        async def roll() -> float:
            return random.random() + time.time() + len(os.environ)

        async def main() -> None:
            print(time.time(), os.getenv("X"))
    """
    assert lint_snippet(source) == []


def test_idempotency_evidence_and_non_writes() -> None:
    source = """
        import sagaway as sw
        from app import manager, bus, db

        @manager.register_activity
        async def announce(key: str) -> None:
            await manager.signal("paid").send(key, True, dedupe_id=f"paid-{key}")

        @manager.register_activity
        def upsert(order: str) -> None:
            db.execute("INSERT INTO t VALUES (?)", (sw.activity_info().idempotency_key,))

        @manager.register_activity
        def read_only(order: str) -> list[str]:
            rows = db.execute("SELECT id FROM t WHERE updated > 0").fetchall()
            rows.insert(0, "header")
            return rows

        @manager.register_activity
        async def emit(order: str) -> None:
            await bus.send(order)
    """
    assert lint_snippet(source) == [(21, "SW301")]


def test_unreadable_and_unparseable_files_are_findings(tmp_path: Path) -> None:
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: no-such-codec -*-\nx = 1\n")
    (tmp_path / "broken.py").write_text("def broken(:\n")
    findings = check_paths([tmp_path])
    assert [(Path(f.path).name, f.code) for f in findings] == [
        ("broken.py", "SW000"),
        ("latin.py", "SW000"),
    ]


def test_whole_package_is_analysed_without_errors() -> None:
    report = lint_paths([ROOT / "src" / "sagaway"])
    assert report.files > 20
    assert [f.format() for f in report.findings if f.code == "SW000"] == []


def test_syntax_error_is_reported_not_raised() -> None:
    findings = check_source("def broken(:\n    pass\n", "broken.py")
    assert [(f.path, f.line, f.code) for f in findings] == [("broken.py", 1, "SW000")]


# ---------------------------------------------------------------------------- suppression


def test_suppression_comments_by_code_prefix_and_all() -> None:
    source = textwrap.dedent(
        """
        x = 1  # sagaway: ignore[SW101, SW2]
        y = "# sagaway: ignore"
        z = 2  # SAGAWAY: IGNORE
        """
    )
    found = parse_suppressions(source)
    assert is_suppressed(found, 2, "SW101")
    assert is_suppressed(found, 2, "SW201")
    assert not is_suppressed(found, 2, "SW102")
    assert not is_suppressed(found, 3, "SW101")  # inside a string: not a comment
    assert is_suppressed(found, 4, "SW601")


def test_suppression_applies_only_to_its_line() -> None:
    source = """
        import time
        import sagaway as sw
        manager = sw.Manager()

        @manager.register_workflow
        async def flow() -> float:
            a = time.time()  # sagaway: ignore[SW101]
            b = time.time()
            return a + b
    """
    assert lint_snippet(source) == [(9, "SW101")]


# ---------------------------------------------------------------------------- select / ignore


def test_select_and_ignore_filter_by_code_or_prefix() -> None:
    everything = check_paths([CORPUS])
    codes = {f.code for f in everything}
    assert {f.code for f in check_paths([CORPUS], select="SW1")} == {
        c for c in codes if c.startswith("SW1")
    }
    assert {f.code for f in check_paths([CORPUS], select=["SW301", "SW401"])} == {
        "SW301",
        "SW401",
    }
    ignored = check_paths([CORPUS], ignore="SW101,SW107")
    assert {f.code for f in ignored} == codes - {"SW101", "SW107"}
    assert check_paths([CORPUS], select="SW1", ignore="SW1") == []


def test_unknown_codes_are_errors() -> None:
    with pytest.raises(ValueError, match="unknown rule code 'SW999'"):
        check_paths([CORPUS], select="SW999")
    with pytest.raises(ValueError, match="unknown rule code 'E501'"):
        check_source("", ignore=["E501"])


def test_finding_formats() -> None:
    finding = Finding("app.py", 3, 5, "SW101", "do this instead")
    assert finding.format() == "app.py:3:5: SW101 do this instead"
    assert finding.to_dict() == {
        "path": "app.py",
        "line": 3,
        "col": 5,
        "code": "SW101",
        "message": "do this instead",
    }


# ---------------------------------------------------------------------------- CLI


def invoke(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(lint, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def test_cli_exit_codes() -> None:
    assert invoke(CORPUS / "good_workflows.py")[0] == 0
    assert invoke(CORPUS / "bad_saga.py")[0] == 1
    assert invoke(CORPUS / "no_such_file.py")[0] == 2
    assert invoke()[0] == 2
    assert invoke(CORPUS, "--select", "SW9")[0] == 2
    assert invoke(CORPUS, "--format", "xml")[0] == 2


def test_cli_text_output_is_one_finding_per_line() -> None:
    code, out, err = invoke(CORPUS / "bad_saga.py")
    assert code == 1
    assert out.splitlines() == [f.format() for f in check_paths([CORPUS / "bad_saga.py"])]
    assert "2 findings" in err


def test_cli_json_output() -> None:
    code, out, _ = invoke(CORPUS, "--format", "json", "--select", "SW2,SW4")
    assert code == 1
    data = json.loads(out)
    expected = check_paths([CORPUS], select="SW2,SW4")
    assert data == [f.to_dict() for f in expected]
    assert {item["code"] for item in data} == {"SW201", "SW202", "SW203", "SW401", "SW402"}


def test_cli_clean_run_and_ignore(tmp_path: Path) -> None:
    code, out, err = invoke(CORPUS / "bad_saga.py", "--ignore", "SW401")
    assert (code, out) == (0, "")
    assert "no findings" in err
    code, out, _ = invoke(CORPUS / "good_factory.py", "--format", "json")
    assert (code, json.loads(out)) == (0, [])


def test_cli_walks_directories_for_python_files(tmp_path: Path) -> None:
    bad = (CORPUS / "bad_saga.py").read_text()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "flows.py").write_text(bad)
    (tmp_path / "pkg" / "notes.txt").write_text(bad)
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "vendored.py").write_text(bad)
    code, out, _ = invoke(tmp_path)
    assert code == 1
    assert {line.split(":")[0] for line in out.splitlines()} == {str(tmp_path / "pkg" / "flows.py")}


def test_cli_command_registers_on_a_group() -> None:
    group = click.Group("sagaway")
    group.add_command(lint)
    result = CliRunner().invoke(group, ["lint", str(CORPUS / "bad_except.py")])
    assert result.exit_code == 1
    assert "SW501" in result.stdout
    help_text = CliRunner().invoke(group, ["lint", "--help"]).stdout
    for code in RULES:
        assert code in help_text


# ---------------------------------------------------------------------------- flake8 plugin


def test_flake8_plugin_protocol() -> None:
    path = CORPUS / "bad_state.py"
    source = path.read_text()
    checker = SagawayChecker(ast.parse(source), str(path), source.splitlines(keepends=True))
    assert checker.name == "sagaway"
    assert isinstance(checker.version, str)
    results = list(checker.run())
    findings = check_source(source, str(path))
    assert [(line, col + 1, text) for line, col, text, _ in results] == [
        (f.line, f.col, f"{f.code} {f.message}") for f in findings
    ]
    assert all(kind is SagawayChecker for *_, kind in results)


def test_flake8_plugin_honours_suppressions_from_lines_or_file() -> None:
    path = CORPUS / "suppressed.py"
    source = path.read_text()
    with_lines = SagawayChecker(ast.parse(source), str(path), source.splitlines(keepends=True))
    from_file = SagawayChecker(ast.parse(source), str(path))
    expected = sorted(line for line, _ in expected_findings(path))
    assert [r[0] for r in with_lines.run()] == expected
    assert [r[0] for r in from_file.run()] == expected


# ---------------------------------------------------------------------------- packaging and docs


def test_pre_commit_hook_definition() -> None:
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "- id: sagaway-lint" in text
    assert "entry: sagaway lint" in text
    assert "language: python" in text
    assert "types: [python]" in text


def test_docs_explain_every_rule() -> None:
    text = (ROOT / "docs" / "lint.md").read_text()
    for code in RULES:
        assert f"## {code}" in text, code
    assert "sagaway: ignore[" in text
