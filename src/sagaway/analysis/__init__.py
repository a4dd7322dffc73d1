"""``sagaway lint``: static checks for workflow and activity code.

Workflow code is re-run from the top on every resume and must be deterministic between durable
calls; activities run at least once and must be idempotent. These rules find the usual ways of
breaking that before it breaks in production. Pure ``ast`` analysis: nothing is imported or run.

    from sagaway.analysis import check_paths
    for finding in check_paths(["app/"]):
        print(finding.format())
"""

from __future__ import annotations

from sagaway.analysis.api import (
    LintReport,
    check_paths,
    check_source,
    check_tree,
    iter_python_files,
    lint_paths,
)
from sagaway.analysis.finding import Finding
from sagaway.analysis.rules import RULES, Rule

__all__ = [
    "RULES",
    "Finding",
    "LintReport",
    "Rule",
    "check_paths",
    "check_source",
    "check_tree",
    "iter_python_files",
    "lint_paths",
]
