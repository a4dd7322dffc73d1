"""SW2xx, SW4xx, SW5xx: durable calls, sagas and error handling around them.

These catch mistakes the engine only reports at run time, often in production and often only on
the failure path: a compensation that is not a registered activity fails exactly when the saga
needs to undo; a saga whose compensations are never run leaves the steps done; an
``except BaseException`` swallows ``sw.Cancelled`` and the engine cannot stop the workflow.
"""

from __future__ import annotations

import ast
from collections.abc import Container, Iterator

from sagaway.analysis.index import (
    FuncNode,
    ModuleIndex,
    ProjectIndex,
    Scope,
    function_names_in,
    walk_body,
    workflow_scopes,
)

Raw = tuple[ast.AST, str, str]


def enclosing_function(module: ModuleIndex, node: ast.AST) -> FuncNode | None:
    """The innermost ``def`` containing ``node``, or None at module level."""
    parent = module.parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef):
            return parent
        parent = module.parents.get(parent)
    return None


def method_calls_on_a_name(
    module: ModuleIndex, methods: Container[str]
) -> Iterator[tuple[ast.Call, str, ast.Name]]:
    """Each call ``x.method(name, ...)`` in ``module`` whose method is one of ``methods`` and
    whose first argument is a plain name (``saga.add_compensation(refund)``): the call, the
    method, the name."""
    for node in module.nodes:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in methods
            and node.args
            and isinstance(node.args[0], ast.Name)
        ):
            yield node, node.func.attr, node.args[0]


# ---------------------------------------------------------------------------- SW201 / SW202

_EXPECTED = {"activity": "activity", "add_compensation": "activity", "workflow": "workflow"}


def _registration_message(method: str, name: str, kinds: set[str]) -> tuple[str, str] | None:
    expected = _EXPECTED[method]
    if expected in kinds:
        return None
    if method == "add_compensation":
        if "workflow" in kinds:
            return "SW202", (
                f"compensation `{name}` is a workflow; compensations run as durable activities: "
                f"register it with `@manager.register_activity`"
            )
        return "SW201", (
            f"compensation `{name}` is not a registered activity, so add_compensation fails "
            "inside the workflow (NotRegistered) when the saga needs it; decorate it with "
            "`@manager.register_activity`"
        )
    if method == "activity":
        if "workflow" in kinds:
            return "SW202", (
                f"`{name}` is a workflow, not an activity: start it with "
                f"`manager.workflow({name}, ...)`"
            )
        return "SW201", (
            f"`{name}` is not a registered activity, so `manager.activity({name}, ...)` fails "
            "(NotRegistered) when the workflow runs; decorate it with "
            "`@manager.register_activity`"
        )
    if "activity" in kinds:
        return "SW202", (
            f"`{name}` is an activity, not a workflow: call it with "
            f"`manager.activity({name}, ...)` or `await {name}(...)`"
        )
    return "SW201", (
        f"`{name}` is not a registered workflow, so `manager.workflow({name}, ...)` fails "
        "(NotRegistered); decorate it with `@manager.register_workflow`"
    )


def check_registrations(module: ModuleIndex, project: ProjectIndex) -> Iterator[Raw]:
    """SW201/SW202: ``manager.activity(f)``, ``manager.workflow(f)``, ``add_compensation(f)``."""
    for node, method, arg in method_calls_on_a_name(module, _EXPECTED):
        name = arg.id
        fn = enclosing_function(module, node)
        if fn is not None and name in module.local_names(fn):
            nested = function_names_in(fn)
            if name not in nested:
                continue  # a parameter or local variable: we cannot know what it holds
        kinds = project.kinds_for(module, name)
        if not kinds:
            continue
        found = _registration_message(method, name, set(kinds))
        if found is not None:
            yield arg, found[0], found[1]


# ---------------------------------------------------------------------------- SW401


def _is_saga_constructor(module: ModuleIndex, expr: ast.expr) -> bool:
    if not isinstance(expr, ast.Call) or expr.args or expr.keywords:
        return False
    resolved = module.resolve(expr.func)
    if resolved in {"sagaway.Saga", "sagaway.saga.Saga"}:
        return True
    func = expr.func
    return (isinstance(func, ast.Name) and func.id == "Saga") or (
        isinstance(func, ast.Attribute) and func.attr == "Saga"
    )


def check_sagas(module: ModuleIndex) -> Iterator[Raw]:
    """SW401: a saga gets compensations but is never executed, compensated or ``async with``-ed.

    A saga that is returned, stored or passed to another function escapes this function; it is
    not reported, since the code that receives it may run it.
    """
    for node in module.nodes:
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and _is_saga_constructor(module, node.value)
        ):
            continue
        name = node.targets[0].id
        scope: ast.AST = enclosing_function(module, node) or module.tree
        additions: list[ast.Call] = []
        handled = False
        for use in ast.walk(scope):
            if not (isinstance(use, ast.Name) and use.id == name and isinstance(use.ctx, ast.Load)):
                continue
            parent = module.parents.get(use)
            if isinstance(parent, ast.Attribute):
                if parent.attr == "add_compensation":
                    call = module.parents.get(parent)
                    if isinstance(call, ast.Call) and call.func is parent:
                        additions.append(call)
                elif parent.attr != "pending":
                    handled = True  # execute(), compensate(), or something we cannot follow
            elif isinstance(parent, ast.Compare):
                continue
            else:
                handled = True  # async with saga, returned, passed on, stored: not ours to judge
        if additions and not handled:
            first = min(additions, key=lambda c: (c.lineno, c.col_offset))
            yield (
                first,
                "SW401",
                (
                    f"compensations are added to saga `{name}` but it is never run: when a step "
                    "fails with a completable error the steps already done stay done; use "
                    f"`async with sw.Saga() as {name}:` or call `await {name}.execute()` in "
                    "`except sw.CompletableError:` before re-raising"
                ),
            )


# ---------------------------------------------------------------------------- SW501

_SWALLOWING = frozenset(
    {
        "builtins.BaseException",
        "sagaway.Cancelled",
        "sagaway.errors.Cancelled",
        "asyncio.CancelledError",
        "asyncio.exceptions.CancelledError",
    }
)


def _broad_types(module: ModuleIndex, handler: ast.ExceptHandler, local: frozenset[str]) -> str:
    """How the handler is too broad (``bare except:``, ``BaseException``...), or ''."""
    if handler.type is None:
        return "bare `except:`"
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    for expr in types:
        if module.resolve(expr, local) in _SWALLOWING:
            return f"`except {ast.unparse(handler.type)}`"
    return ""


def _has_durable_call(module: ModuleIndex, project: ProjectIndex, body: list[ast.stmt]) -> bool:
    """An await, ``async with``/``async for``, or a direct call of a registered function."""
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Await | ast.AsyncWith | ast.AsyncFor):
                return True
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                kinds = project.kinds_for(module, node.func.id) or set()
                if kinds - {"plain"}:
                    return True
    return False


_CANCELLATION = frozenset({"sagaway.Cancelled", "sagaway.errors.Cancelled"})


def _only_cancellation(
    module: ModuleIndex, handler: ast.ExceptHandler, local: frozenset[str]
) -> bool:
    """The handler's broad types are ``sw.Cancelled`` only (not BaseException, not asyncio's)."""
    if handler.type is None:
        return False
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    broad = {module.resolve(expr, local) for expr in types} & _SWALLOWING
    return bool(broad) and broad <= _CANCELLATION


def _reraises(handler: ast.ExceptHandler, *, awaits: bool = False) -> bool:
    """The handler ends with ``raise`` (or ``raise <its exception>``) and (unless ``awaits``)
    awaits nothing."""
    if not handler.body:
        return False
    if not awaits and any(isinstance(n, ast.Await) for n in ast.walk(handler)):
        return False
    last = handler.body[-1]
    if not isinstance(last, ast.Raise):
        return False
    return last.exc is None or (
        isinstance(last.exc, ast.Name) and handler.name is not None and last.exc.id == handler.name
    )


def check_broad_except(module: ModuleIndex, project: ProjectIndex) -> Iterator[Raw]:
    """SW501: bare ``except:`` / ``except BaseException`` around durable calls in workflow code."""
    for scope in workflow_scopes(module):
        yield from _broad_except_in(module, project, scope)


def _broad_except_in(module: ModuleIndex, project: ProjectIndex, scope: Scope) -> Iterator[Raw]:
    local = module.local_names(scope.fn)
    for node in walk_body(module, scope.fn):
        if not isinstance(node, ast.Try | ast.TryStar):
            continue
        if not _has_durable_call(module, project, node.body):
            continue
        for handler in node.handlers:
            what = _broad_types(module, handler, local)
            if not what:
                continue
            if _reraises(handler):
                continue
            if _only_cancellation(module, handler, local) and _reraises(handler, awaits=True):
                # Compensating a cancellation, then re-raising it: what a Saga does. Should
                # the process have lost the workflow instead, every durable call refuses.
                continue
            if any(isinstance(n, ast.Await) for n in ast.walk(handler)):
                advice = (
                    "it makes durable calls after any BaseException; compensate in "
                    "`except (sw.CompletableError, sw.Cancelled):` and re-raise"
                )
            else:
                advice = (
                    "it swallows sw.Cancelled and incompletable errors, so the engine cannot "
                    "stop or suspend the workflow; catch sw.CompletableError (or Exception)"
                )
            yield handler, "SW501", f"{what} around durable calls: {advice}{scope.suffix()}"
