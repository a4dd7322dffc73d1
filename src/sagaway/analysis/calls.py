"""SW203, SW402: durable calls that do nothing, and compensations that cannot run.

``r = pay(order)`` in a workflow, without ``await``, makes a coroutine and drops it: the
activity never runs, nothing is recorded, and ``r`` is not its result (Python warns, at run
time, that a coroutine was never awaited). ``saga.add_compensation(refund)`` when ``refund``
takes a payment id is accepted when added and fails (``TypeError``) only when the saga runs it,
on the failure path that needed it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from sagaway.analysis.durable import Raw, enclosing_function, method_calls_on_a_name
from sagaway.analysis.index import (
    FuncNode,
    ModuleIndex,
    ProjectIndex,
    function_names_in,
    walk_body,
    workflow_scopes,
)

_EXECUTE = {
    "activity": {"execute_get", "execute_wait"},
    "workflow": {"execute", "execute_get", "execute_wait"},
}


def _durable_callee(
    module: ModuleIndex,
    project: ProjectIndex,
    call: ast.Call,
    local: frozenset[str],
    nested: set[str],
) -> str | None:
    """How ``call`` is a durable call (for the message), or None: a registered activity or
    workflow called by name, or ``manager.activity(f, ...).execute_get()`` and the like."""
    func = call.func
    if isinstance(func, ast.Name):
        if func.id in local and func.id not in nested:
            return None  # a parameter or variable: we cannot know what it holds
        kinds = project.kinds_for(module, func.id) or set()
        if "plain" in kinds or not kinds & {"activity", "workflow"}:
            return None
        kind = "activity" if "activity" in kinds else "workflow"
        return f"{kind} `{func.id}`"
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Attribute)
        and func.value.func.attr in _EXECUTE
        and func.attr in _EXECUTE[func.value.func.attr]
    ):
        return f"`{ast.unparse(func.value.func)}(...).{func.attr}()`"
    return None


def _consumed_later(scope: ast.AST, name: str, module: ModuleIndex, *, returns: bool) -> bool:
    """``name`` is awaited, passed to a call (``asyncio.gather(t)``) or (``returns``: in a
    helper, whose caller may await it) returned somewhere in ``scope``: the coroutine it holds
    may well be run. A workflow that returns it returns a coroutine, not a result."""
    for node in ast.walk(scope):
        if not (isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)):
            continue
        parent = module.parents.get(node)
        if isinstance(parent, ast.Await | ast.Starred | ast.List | ast.Tuple):
            return True
        if returns and isinstance(parent, ast.Return):
            return True
        if isinstance(parent, ast.Call) and node is not parent.func:
            return True
        if isinstance(parent, ast.keyword):
            return True
    return False


def check_unawaited(module: ModuleIndex, project: ProjectIndex) -> Iterator[Raw]:
    """SW203: a durable call in workflow code whose coroutine is dropped: a statement of its
    own (``pay(order)``) or assigned (``r = pay(order)``) and never awaited or passed on."""
    for scope in workflow_scopes(module):
        local = module.local_names(scope.fn)
        nested = function_names_in(scope.fn)
        for node in walk_body(module, scope.fn):
            if isinstance(node, ast.Expr):
                value, target = node.value, None
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                    continue
                value, target = node.value, targets[0].id
            else:
                continue
            if not isinstance(value, ast.Call):
                continue
            what = _durable_callee(module, project, value, local, nested)
            if what is None:
                continue
            if target is not None and _consumed_later(
                scope.fn, target, module, returns=scope.helper is not None
            ):
                continue
            shown = ast.unparse(value)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            yield (
                value,
                "SW203",
                (
                    f"{what} is called without `await`: `{shown}` only makes a coroutine, so it "
                    f"never runs and nothing is recorded; write `await {shown}`{scope.suffix()}"
                ),
            )


def _missing_arguments(fn: FuncNode, call: ast.Call) -> tuple[list[str], list[str]]:
    """Required parameters of ``fn`` (positional ones, keyword-only ones) that
    ``add_compensation(fn, ...)`` does not give; none when it passes ``*args`` or ``**kwargs``
    (we cannot count those)."""
    given = call.args[1:]
    if any(isinstance(a, ast.Starred) for a in given) or any(k.arg is None for k in call.keywords):
        return [], []
    named = {k.arg for k in call.keywords}
    params = fn.args
    positional = [*params.posonlyargs, *params.args]
    required = positional[: len(positional) - len(params.defaults)]
    if len(given) > len(positional) and params.vararg is None:
        return [], []  # too many: another mistake, not this rule's
    missing = [p.arg for p in required[len(given) :] if p.arg not in named]
    keyword_only = [
        p.arg
        for p, default in zip(params.kwonlyargs, params.kw_defaults, strict=True)
        if default is None and p.arg not in named
    ]
    return missing, keyword_only


def check_compensation_arguments(module: ModuleIndex, project: ProjectIndex) -> Iterator[Raw]:
    """SW402: ``saga.add_compensation(f, ...)`` without arguments ``f`` requires."""
    for node, _, arg in method_calls_on_a_name(module, {"add_compensation"}):
        name = arg.id
        fn = enclosing_function(module, node)
        if fn is not None and name in module.local_names(fn):
            continue  # a parameter, variable or nested function: not the module's
        kinds = project.kinds_for(module, name) or set()
        definition = project.definition(module, name)
        if "activity" not in kinds or definition is None:
            continue
        missing, keyword_only = _missing_arguments(definition, node)
        if missing or keyword_only:
            names = ", ".join(f"`{m}`" for m in (*missing, *keyword_only))
            fixed = [ast.unparse(a) for a in node.args]
            fixed += [*missing, *(ast.unparse(k) for k in node.keywords)]
            fixed += [f"{k}=..." for k in keyword_only]
            yield (
                node,
                "SW402",
                (
                    f"compensation `{name}` is added without {names}, which it requires: the saga "
                    "calls it with the arguments given here, so it fails (TypeError) just when it "
                    f"must undo; pass them: `{ast.unparse(node.func)}({', '.join(fixed)})`"
                ),
            )
