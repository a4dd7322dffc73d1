"""Patches are named apart from code versions: ``sw.patched``/``sw.deprecate_patch`` live in
``sagaway.patching``; the old module name ``sagaway.versioning`` still works, with a
``DeprecationWarning``, and the checker (``sagaway lint``) knows the calls under every name."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

import pytest

import sagaway as sw
from sagaway import patching
from sagaway.analysis import check_source


def test_the_public_names_come_from_sagaway_patching() -> None:
    assert sw.patched is patching.patched
    assert sw.deprecate_patch is patching.deprecate_patch
    # A fresh interpreter: importing sagaway loads no deprecated module (nothing warns).
    check = "import sys, sagaway; assert 'sagaway.versioning' not in sys.modules"
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", check],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_the_old_module_name_warns_and_gives_the_same_functions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "sagaway.versioning", raising=False)
    with pytest.warns(DeprecationWarning, match=r"sagaway\.versioning is deprecated") as warned:
        old = importlib.import_module("sagaway.versioning")
    assert "import sagaway.patching" in str(warned[0].message)
    assert "patches are not code versions" in str(warned[0].message)
    assert old.patched is sw.patched
    assert old.deprecate_patch is sw.deprecate_patch


@pytest.mark.parametrize("module", ["sagaway.patching", "sagaway.versioning"])
def test_the_checker_knows_patches_imported_from_either_module(module: str) -> None:
    source = textwrap.dedent(
        f"""
        import sagaway as sw
        from {module} import patched

        manager = sw.Manager()

        @manager.register_workflow
        async def order(order_id: str) -> str:
            if patched(order_id):
                return "new"
            return "old"
        """
    )
    assert [f.code for f in check_source(source)] == ["SW701"]
