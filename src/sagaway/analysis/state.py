"""SW601: workflow code must not depend on mutable module-level state.

A module-level list, dict or set lives in one process. A workflow resumed in another process (or
in the same one after other workflows ran) sees other contents, and what it does with them is
not recorded, so replays diverge. A container the module never mutates inside a function is
treated as a constant and not reported: it has the same value in every process, like a tuple.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from sagaway.analysis.index import ModuleIndex, iter_module_statements, walk_body, workflow_scopes

Raw = tuple[ast.AST, str, str]

_CONTAINER_BUILTINS = frozenset({"list", "dict", "set", "bytearray"})
_CONTAINER_PREFIXES = ("collections.", "queue.")
_CONTAINER_NAMES = frozenset({"asyncio.Queue", "asyncio.LifoQueue", "asyncio.PriorityQueue"})

_MUTATORS = frozenset(
    {
        "append",
        "appendleft",
        "extend",
        "extendleft",
        "insert",
        "pop",
        "popleft",
        "popitem",
        "remove",
        "clear",
        "update",
        "setdefault",
        "add",
        "discard",
        "sort",
        "reverse",
        "rotate",
        "move_to_end",
        "subtract",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
        "put",
        "put_nowait",
        "get",
        "get_nowait",
        "__setitem__",
        "__delitem__",
    }
)
#: ``get`` mutates queues only; on dicts it is a read.
_QUEUE_ONLY = frozenset({"get", "get_nowait", "put", "put_nowait"})


def _is_mutable_container(module: ModuleIndex, value: ast.expr) -> bool:
    if isinstance(value, ast.List | ast.Dict | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp):
        return True
    if isinstance(value, ast.Call):
        name = module.resolve(value.func)
        if name is None:
            return False
        if name.removeprefix("builtins.") in _CONTAINER_BUILTINS and name.startswith("builtins."):
            return True
        return name in _CONTAINER_NAMES or name.startswith(_CONTAINER_PREFIXES)
    return False


def _is_queue(module: ModuleIndex, value: ast.expr) -> bool:
    """``queue.Queue()``/``asyncio.Queue()``: their ``get``/``put`` mutate."""
    if not isinstance(value, ast.Call):
        return False
    name = module.resolve(value.func) or ""
    return name in _CONTAINER_NAMES or name.startswith("queue.")


def module_containers(module: ModuleIndex) -> dict[str, bool]:
    """Module-level names bound to mutable containers -> whether the container is a queue."""
    containers: dict[str, bool] = {}
    rebound: set[str] = set()
    for stmt in iter_module_statements(module.tree):
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        for target in targets:
            if not isinstance(target, ast.Name) or target.id.startswith("__"):
                continue
            if value is not None and _is_mutable_container(module, value):
                containers[target.id] = containers.get(target.id, False) or _is_queue(module, value)
            else:
                rebound.add(target.id)  # also bound to something else: not tracked
    return {name: queue for name, queue in containers.items() if name not in rebound}


def _mutation(node: ast.Name, module: ModuleIndex, is_queue: bool) -> bool:
    """Whether this use of the name mutates the container (or rebinds the global)."""
    parent = module.parents.get(node)
    if isinstance(parent, ast.Attribute) and parent.value is node:
        call = module.parents.get(parent)
        if isinstance(call, ast.Call) and call.func is parent and parent.attr in _MUTATORS:
            return is_queue or parent.attr not in _QUEUE_ONLY
        return False
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return isinstance(parent.ctx, ast.Store | ast.Del)
    return isinstance(node.ctx, ast.Store | ast.Del)


def check_module_state(module: ModuleIndex) -> Iterator[Raw]:
    """SW601: workflow code reads a mutated module-level container, or mutates one."""
    if not module.workflows:
        return
    containers = module_containers(module)
    if not containers:
        return
    # Which functions mutate each container (any function of the module).
    mutated_by: dict[str, str] = {}
    for info in module.functions:
        local = module.local_names(info.node)
        for node in ast.walk(info.node):
            if isinstance(node, ast.Name) and node.id in containers and node.id not in local:
                if _mutation(node, module, containers[node.id]):
                    mutated_by.setdefault(node.id, info.name)
            elif isinstance(node, ast.Global):
                for name in node.names:
                    if name in containers:
                        mutated_by.setdefault(name, info.name)
    for scope in workflow_scopes(module):
        local = module.local_names(scope.fn)
        uses: dict[str, list[ast.Name]] = {}
        for node in walk_body(module, scope.fn):
            if isinstance(node, ast.Name) and node.id in containers and node.id not in local:
                uses.setdefault(node.id, []).append(node)
        for name, nodes in uses.items():
            mutations = [n for n in nodes if _mutation(n, module, containers[name])]
            if mutations:
                node, what = mutations[0], f"mutates module-level `{name}`"
            elif name in mutated_by:
                node, what = (
                    nodes[0],
                    f"reads module-level `{name}`, which `{mutated_by[name]}` mutates",
                )
            else:
                continue  # never mutated: a constant
            yield (
                node,
                "SW601",
                (
                    f"workflow code {what}: a workflow resumed in another process sees other "
                    "contents, and nothing about it is recorded; pass the data as arguments, or "
                    f"keep it in a database read and written by activities{scope.suffix()}"
                ),
            )
