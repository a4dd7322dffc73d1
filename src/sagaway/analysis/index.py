"""What the rules need to know about a module: imports, functions and their registrations.

The checker is purely syntactic (stdlib ``ast``; nothing is imported or run), so it recognises
workflows and activities by how they are registered: a decorator whose name ends in
``register_workflow`` / ``register_activity`` (bare or called: ``@manager.register_activity``,
``@app_manager.register_activity(retry=...)``), or the call form
``charge = manager.register_activity(_charge)``. The receiver's name does not matter, so any
``Manager`` variable works.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from typing import Literal, TypeAlias

Kind: TypeAlias = Literal["workflow", "activity", "plain"]
FuncNode: TypeAlias = ast.FunctionDef | ast.AsyncFunctionDef

_REGISTRATION: dict[str, Kind] = {
    "register_workflow": "workflow",
    "register_activity": "activity",
}

#: Builtins the rules care about; resolved as ``builtins.<name>`` unless shadowed.
BUILTINS = frozenset(
    {
        "open",
        "input",
        "hash",
        "id",
        "set",
        "frozenset",
        "list",
        "tuple",
        "dict",
        "bytearray",
        "enumerate",
        "zip",
        "iter",
        "reversed",
        "map",
        "filter",
        "sorted",
        "sum",
        "min",
        "max",
        "any",
        "all",
        "len",
        "BaseException",
    }
)


def registration_kind(expr: ast.expr) -> Kind | None:
    """The kind registered by a decorator expression, or None for other decorators."""
    if isinstance(expr, ast.Call):
        expr = expr.func
    if isinstance(expr, ast.Attribute):
        return _REGISTRATION.get(expr.attr)
    if isinstance(expr, ast.Name):
        return _REGISTRATION.get(expr.id)
    return None


def _call_form_registration(call: ast.Call) -> tuple[Kind, str] | None:
    """``manager.register_activity(fn)`` or ``manager.register_activity(name=...)(fn)``."""
    if not call.args or not isinstance(call.args[0], ast.Name):
        return None
    kind = registration_kind(call.func)
    if kind is None:
        return None
    if isinstance(call.func, ast.Call) and call.func.args:
        return None  # register_activity(fn)(x): not a registration form we know
    return kind, call.args[0].id


@dataclasses.dataclass(eq=False)
class FunctionInfo:
    """A ``def`` in the module, with how it is registered."""

    node: FuncNode
    kind: Kind
    qualname: str
    in_class: bool

    @property
    def name(self) -> str:
        return self.node.name


def function_local_names(fn: FuncNode) -> frozenset[str]:
    """Names bound inside ``fn`` (parameters, assignments, nested defs), minus ``global`` ones.

    Used to tell ``time`` the module from a local variable called ``time``. Flow-insensitive on
    purpose: a name bound anywhere in the function shadows the module name everywhere in it.
    """
    names: set[str] = set()
    declared_global: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node is not fn:
                names.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            declared_global.update(node.names)
    return frozenset(names - declared_global)


def function_names_in(fn: FuncNode) -> set[str]:
    """Names of the functions ``def``-ined in ``fn`` at any depth, ``fn``'s own included: a
    call to one of them runs that function, not a parameter or variable of the same name."""
    return {n.name for n in ast.walk(fn) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


class ModuleIndex:
    """One parsed module: imports, functions, registrations and a parent map."""

    def __init__(self, tree: ast.Module, path: str) -> None:
        self.tree = tree
        self.path = path
        self.nodes: list[ast.AST] = list(ast.walk(tree))
        """Every node once (one walk, shared by the rules)."""
        self.parents: dict[ast.AST, ast.AST] = {}
        for parent in self.nodes:
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self.imports: dict[str, str] = {}
        """Local name -> dotted name it refers to (``np`` -> ``numpy``)."""
        self.imported_names: dict[str, str] = {}
        """Local name -> original name, for ``from x import name [as local]``."""
        self._collect_imports()
        self.module_names = self._module_level_names()
        self.aliases: dict[str, set[Kind]] = {}
        """Names bound to a registration call: ``charge = manager.register_activity(_charge)``."""
        self.call_registered: dict[str, set[Kind]] = {}
        """Names passed to a registration call: ``manager.register_activity(charge)``."""
        call_registered = self.call_registered
        for node in self.nodes:
            if isinstance(node, ast.Call):
                found = _call_form_registration(node)
                if found is not None:
                    kind, name = found
                    call_registered.setdefault(name, set()).add(kind)
                    assign = self.parents.get(node)
                    if isinstance(assign, ast.Assign):
                        for target in assign.targets:
                            if isinstance(target, ast.Name):
                                self.aliases.setdefault(target.id, set()).add(kind)
        self.functions: list[FunctionInfo] = []
        self._collect_functions(tree, (), False, call_registered)
        self.defs_by_name: dict[str, list[FunctionInfo]] = {}
        for info in self.functions:
            if not info.in_class:
                self.defs_by_name.setdefault(info.name, []).append(info)
        self.by_node: dict[ast.AST, FunctionInfo] = {info.node: info for info in self.functions}
        self._local_names: dict[ast.AST, frozenset[str]] = {}

    # ------------------------------------------------------------------ collection

    def _collect_imports(self) -> None:
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.imports[top] = top
            elif isinstance(node, ast.ImportFrom):
                base = "." * node.level + (node.module or "")
                for alias in node.names:
                    if alias.name == "*":
                        continue
                    local = alias.asname or alias.name
                    self.imports[local] = f"{base}.{alias.name}" if base else alias.name
                    self.imported_names[local] = alias.name

    def _module_level_names(self) -> frozenset[str]:
        """Names bound by module-level statements (they shadow builtins)."""
        names: set[str] = set()
        for stmt in iter_module_statements(self.tree):
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(stmt.name)
                continue
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
        return frozenset(names)

    def _collect_functions(
        self,
        node: ast.AST,
        prefix: tuple[str, ...],
        in_class: bool,
        call_registered: dict[str, set[Kind]],
    ) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                kind: Kind = "plain"
                for decorator in child.decorator_list:
                    found = registration_kind(decorator)
                    if found is not None:
                        kind = found
                if kind == "plain" and not in_class and child.name in call_registered:
                    kinds = call_registered[child.name]
                    kind = "workflow" if "workflow" in kinds else "activity"
                qualname = ".".join((*prefix, child.name))
                self.functions.append(FunctionInfo(child, kind, qualname, in_class))
                self._collect_functions(child, (*prefix, child.name), False, call_registered)
            elif isinstance(child, ast.ClassDef):
                self._collect_functions(child, (*prefix, child.name), True, call_registered)
            else:
                self._collect_functions(child, prefix, in_class, call_registered)

    # ------------------------------------------------------------------ queries

    @property
    def workflows(self) -> list[FunctionInfo]:
        return [f for f in self.functions if f.kind == "workflow"]

    @property
    def activities(self) -> list[FunctionInfo]:
        return [f for f in self.functions if f.kind == "activity"]

    def local_names(self, fn: FuncNode) -> frozenset[str]:
        """Cached :func:`function_local_names`."""
        cached = self._local_names.get(fn)
        if cached is None:
            cached = self._local_names[fn] = function_local_names(fn)
        return cached

    def resolve(self, expr: ast.expr, local: frozenset[str] = frozenset()) -> str | None:
        """The dotted name an expression refers to through the imports, or None.

        ``dt.datetime.now`` with ``import datetime as dt`` is ``datetime.datetime.now``;
        ``open`` is ``builtins.open`` unless the module or function rebinds it. Names bound in
        the function (``local``) resolve to None: they are not the module.
        """
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name) or expr.id in local:
            return None
        base = self.imports.get(expr.id)
        if base is None:
            if expr.id in BUILTINS and expr.id not in self.module_names:
                base = f"builtins.{expr.id}"
            else:
                return None
        return ".".join([base, *reversed(parts)])

    def is_builtin(self, expr: ast.expr, name: str, local: frozenset[str]) -> bool:
        """``expr`` is the unshadowed builtin ``name``."""
        return self.resolve(expr, local) == f"builtins.{name}"

    def registered_kind(self, fn: FuncNode) -> Kind:
        info = self.by_node.get(fn)
        return info.kind if info is not None else "plain"

    def kinds_of(self, name: str) -> set[Kind] | None:
        """Kinds of the module-local functions (or registration aliases) called ``name``."""
        infos = self.defs_by_name.get(name)
        if infos is None and name not in self.aliases:
            return None
        kinds: set[Kind] = {info.kind for info in infos or ()}
        kinds |= self.aliases.get(name, set())
        return kinds


class ProjectIndex:
    """Registrations across every analysed file, for calls of imported functions."""

    def __init__(self, modules: list[ModuleIndex]) -> None:
        self.kinds_by_name: dict[str, set[Kind]] = {}
        self.registered_by_call: dict[str, set[Kind]] = {}
        """``register_activity(f)`` anywhere registers ``f``, possibly imported from elsewhere."""
        self.defs_by_name: dict[str, list[FuncNode]] = {}
        """Module-level (not in a class) functions of every analysed file, by name."""
        for module in modules:
            for name, infos in module.defs_by_name.items():
                self.defs_by_name.setdefault(name, []).extend(info.node for info in infos)
            for name, kinds in module.call_registered.items():
                self.registered_by_call.setdefault(name, set()).update(kinds)
            for info in module.functions:
                if not info.in_class:
                    self.kinds_by_name.setdefault(info.name, set()).add(info.kind)
            for name, kinds in module.aliases.items():
                self.kinds_by_name.setdefault(name, set()).update(kinds)

    def kinds_for(self, module: ModuleIndex, name: str) -> set[Kind] | None:
        """What ``name`` in ``module`` refers to, or None when it is not a function we know."""
        kinds = module.kinds_of(name)
        if kinds is None:
            original = module.imported_names.get(name)
            if original is None or original not in self.kinds_by_name:
                return None
            name = original
            kinds = self.kinds_by_name[name]
        return kinds | self.registered_by_call.get(name, set())

    def definition(self, module: ModuleIndex, name: str) -> FuncNode | None:
        """The one ``def`` that ``name`` in ``module`` calls (its own, else the imported one's
        in another analysed file); None when there is none or several."""
        own = module.defs_by_name.get(name)
        if own is not None:
            return own[0].node if len(own) == 1 and name not in module.aliases else None
        original = module.imported_names.get(name)
        found = self.defs_by_name.get(original or "", [])
        return found[0] if original is not None and len(found) == 1 else None


def iter_module_statements(tree: ast.Module) -> Iterator[ast.stmt]:
    """Module-level statements, including those nested in module-level if/try/with blocks."""
    stack: list[ast.stmt] = list(reversed(tree.body))
    while stack:
        stmt = stack.pop()
        yield stmt
        blocks: list[list[ast.stmt]] = []
        if isinstance(stmt, ast.If | ast.While | ast.For | ast.With):
            blocks = [stmt.body, stmt.orelse] if not isinstance(stmt, ast.With) else [stmt.body]
        elif isinstance(stmt, ast.Try | ast.TryStar):
            blocks = [stmt.body, stmt.orelse, stmt.finalbody]
            blocks.extend(handler.body for handler in stmt.handlers)
        for block in reversed(blocks):
            stack.extend(reversed(block))


def walk_body(module: ModuleIndex, fn: FuncNode) -> Iterator[ast.AST]:
    """The nodes of ``fn``'s body in source order, skipping nested registered functions.

    A nested plain function or lambda is part of the workflow (it runs when the workflow calls
    it); a nested ``@register_activity`` function is checked as an activity instead.
    """
    stack: list[ast.AST] = list(reversed(fn.body))
    while stack:
        node = stack.pop()
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and module.registered_kind(node) != "plain"
        ):
            continue
        yield node
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


@dataclasses.dataclass(frozen=True)
class Scope:
    """Code that runs as workflow code: a workflow body, or a helper a workflow calls."""

    fn: FuncNode
    workflow: str
    helper: str | None = None

    def suffix(self) -> str:
        """Where the finding is, for helpers: the workflow that makes it workflow code."""
        if self.helper is None:
            return ""
        return f" (in helper `{self.helper}`, called from workflow `{self.workflow}`)"


def workflow_scopes(module: ModuleIndex) -> list[Scope]:
    """Every workflow body, plus module functions the workflows call, transitively.

    A helper called by name from workflow code runs as workflow code, so the determinism rules
    apply to it too. Only unregistered functions defined in the same module are followed, and
    each is checked once (attributed to the first workflow that reaches it).
    """
    scopes: list[Scope] = []
    seen: set[ast.AST] = set()
    queue: list[Scope] = [Scope(info.node, info.name) for info in module.workflows]
    while queue:
        scope = queue.pop(0)
        if scope.fn in seen:
            continue
        seen.add(scope.fn)
        scopes.append(scope)
        local = module.local_names(scope.fn)
        nested = function_names_in(scope.fn)
        for node in walk_body(module, scope.fn):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            callee = node.func.id
            if callee in local and callee not in nested:
                continue  # a parameter or variable that shadows a module function
            infos = module.defs_by_name.get(callee, [])
            if infos and all(info.kind == "plain" for info in infos):
                queue.extend(Scope(info.node, scope.workflow, callee) for info in infos)
    return scopes
