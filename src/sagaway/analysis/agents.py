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


def check_agents(module: ModuleIndex) -> Iterator[Raw]:
    """Direct agent runs and direct model requests in workflow code."""
    agents = _agent_names(module)
    if not agents and not any(name.startswith("pydantic_ai") for name in module.imports.values()):
        return
    for scope in workflow_scopes(module):
        local = module.local_names(scope.fn)
        for node in walk_body(module, scope.fn):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            shown = ast.unparse(func)
            if (
                isinstance(func, ast.Attribute)
                and func.attr in _RUN_METHODS
                and isinstance(func.value, ast.Name)
                and func.value.id in agents
                and func.value.id not in local
            ):
                yield (
                    node,
                    CODE,
                    (
                        f"`{shown}()` runs the agent outside any durable step: its model requests "
                        "and tool calls are not recorded, so a resumed workflow sends them again; "
                        "use sagaway.agents.DurableAgent instead (`await durable.run(...)`)"
                        + scope.suffix()
                    ),
                )
            elif (module.resolve(func, local) or "").startswith(_DIRECT):
                yield (
                    node,
                    CODE,
                    (
                        f"`{shown}()` sends a model request from workflow code, unrecorded: a "
                        "resumed workflow sends it again; move it into an activity, or use "
                        "sagaway.agents.DurableAgent" + scope.suffix()
                    ),
                )
