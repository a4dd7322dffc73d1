"""SW7xx: ``sw.patched`` and ``sw.deprecate_patch``, the rules of changing running workflows.

- SW701: the change id is not a string literal. The id is stored in the histories of running
  executions and must be the same in every deploy; a computed id can change under them.
- SW702: ``patched`` or ``deprecate_patch`` is called in an activity. Only workflow code has a
  history to branch on (it raises at run time).
- SW703: one change id is used by both ``patched`` and ``deprecate_patch`` in a module. The
  deprecation replaces the ``patched`` call once the old path is gone; with both, executions
  pass the same change twice and the second call reads the wrong step.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from sagaway.analysis.durable import enclosing_function
from sagaway.analysis.index import ModuleIndex

Raw = tuple[ast.AST, str, str]

_FUNCTIONS = {
    "sagaway.patched": "patched",
    "sagaway.patching.patched": "patched",
    "sagaway.versioning.patched": "patched",  # the deprecated old module
    "sagaway.deprecate_patch": "deprecate_patch",
    "sagaway.patching.deprecate_patch": "deprecate_patch",
    "sagaway.versioning.deprecate_patch": "deprecate_patch",
}


def _patch_calls(module: ModuleIndex) -> Iterator[tuple[ast.Call, str]]:
    for node in module.nodes:
        if isinstance(node, ast.Call):
            fn = enclosing_function(module, node)
            local = module.local_names(fn) if fn is not None else frozenset()
            which = _FUNCTIONS.get(module.resolve(node.func, local) or "")
            if which is not None:
                yield node, which


def check_patches(module: ModuleIndex) -> Iterator[Raw]:
    """SW701, SW702, SW703 (see the module docstring)."""
    ids: dict[str, dict[str, ast.Call]] = {}
    for call, which in _patch_calls(module):
        arg = call.args[0] if call.args else None
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            yield (
                arg or call,
                "SW701",
                f"`{which}()`: use a string literal as the change id; it is stored in running "
                "executions' histories and must not change between deploys",
            )
        else:
            ids.setdefault(arg.value, {}).setdefault(which, call)
        fn = enclosing_function(module, call)
        if fn is not None and module.registered_kind(fn) == "activity":
            yield (
                call,
                "SW702",
                f"`{which}()` in activity `{fn.name}`: only workflow code has a history to "
                "branch on; decide in the workflow and pass the answer to the activity",
            )
    for change_id, seen in ids.items():
        if len(seen) == 2:
            yield (
                seen["deprecate_patch"],
                "SW703",
                f"change id {change_id!r} is used by both `patched()` and "
                "`deprecate_patch()`: call `deprecate_patch()` in place of `patched()` once "
                "no execution can take the old path, not beside it",
            )
