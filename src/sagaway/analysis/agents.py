"""SW801: an AI agent's model and tool calls belong in durable steps, not in workflow code.

Called straight from a workflow, ``agent.run(...)`` sends model requests and runs tools that
nothing records: a resumed workflow sends them again (billed twice, a tool's effect done twice)
and may get another answer, so the workflow takes another path. ``sagaway.agents.DurableAgent``
makes each request and tool call a step; this rule finds the direct calls: a method that runs
a Pydantic AI ``Agent`` (bound to a module-level name) and ``pydantic_ai.direct`` requests.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from sagaway.analysis.index import ModuleIndex, walk_body, workflow_scopes

Raw = tuple[ast.AST, str, str]

CODE = "SW801"

_AGENT_CLASSES = frozenset({"pydantic_ai.Agent", "pydantic_ai.agent.Agent"})
_RUN_METHODS = frozenset(
    {"run", "run_sync", "run_stream", "run_stream_sync", "run_stream_events", "iter"}
)
_DIRECT = "pydantic_ai.direct."
_TOOL_DECORATORS = frozenset({"tool", "tool_plain"})


def _agent_names(module: ModuleIndex) -> frozenset[str]:
    """Module-level names bound to ``Agent(...)``."""
    names: set[str] = set()
    for stmt in module.tree.body:
        value: ast.expr | None
        targets: list[ast.expr]
        if isinstance(stmt, ast.Assign):
            value, targets = stmt.value, stmt.targets
        elif isinstance(stmt, ast.AnnAssign):
            value, targets = stmt.value, [stmt.target]
        else:
            continue
        if not isinstance(value, ast.Call) or module.resolve(value.func) not in _AGENT_CLASSES:
            continue
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(names)


def _tool_names(module: ModuleIndex) -> frozenset[str]:
    """Module-level functions declared as an agent's tools (``@agent.tool_plain``,
    ``@durable.tool(...)``)."""
    names: set[str] = set()
    for stmt in module.tree.body:
        if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in stmt.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if isinstance(target, ast.Attribute) and target.attr in _TOOL_DECORATORS:
                names.add(stmt.name)
    return frozenset(names)


def check_agents(module: ModuleIndex) -> Iterator[Raw]:
    """Direct agent runs, direct model requests and direct tool calls in workflow code."""
    imported = module.imports.values()
    if not any(name.startswith(("pydantic_ai", "sagaway.agents")) for name in imported):
        return
    agents, tools = _agent_names(module), _tool_names(module)
    for scope in workflow_scopes(module):
        local = module.local_names(scope.fn)
        for node in walk_body(module, scope.fn):
            if isinstance(node, ast.Call):
                message = _message(module, node.func, local, agents, tools)
                if message is not None:
                    yield node, CODE, message + scope.suffix()


def _message(
    module: ModuleIndex,
    func: ast.expr,
    local: frozenset[str],
    agents: frozenset[str],
    tools: frozenset[str],
) -> str | None:
    """What is wrong with calling ``func`` in workflow code, or None."""
    shown = ast.unparse(func)
    if (
        isinstance(func, ast.Attribute)
        and func.attr in _RUN_METHODS
        and isinstance(func.value, ast.Name)
        and func.value.id in agents
        and func.value.id not in local
    ):
        return (
            f"`{shown}()` runs the agent outside any durable step: its model requests and tool "
            "calls are not recorded, so a resumed workflow sends them again; use "
            "sagaway.agents.DurableAgent instead (`await durable.run(...)`)"
        )
    if isinstance(func, ast.Name) and func.id in tools and func.id not in local:
        return (
            f"`{shown}()` calls an agent's tool from workflow code, outside any step: it runs "
            "again on every resume; let the agent call it (each call is then a step), or "
            "register it as an activity to call it yourself"
        )
    if (module.resolve(func, local) or "").startswith(_DIRECT):
        return (
            f"`{shown}()` sends a model request from workflow code, unrecorded: a resumed "
            "workflow sends it again; move it into an activity, or use "
            "sagaway.agents.DurableAgent"
        )
    return None
