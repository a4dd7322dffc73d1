"""SW1xx: workflow code must be deterministic between durable calls.

A resumed workflow runs its function again from the top and replays recorded calls by their
position. Anything that can differ between the first run and the replay (the clock, random
values, the environment, I/O, thread timing, set order, per-process hashes) can change which
durable calls are made, or in which order, and the replay then fails with NonDeterminismError or
silently takes another branch. Such values belong in activities, whose results are recorded.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from sagaway.analysis.index import ModuleIndex, Scope, walk_body, workflow_scopes

Raw = tuple[ast.AST, str, str]
"""(node to report at, rule code, message)."""

_CLOCK = "SW101"
_RANDOM = "SW102"
_ENV = "SW103"
_THREAD = "SW104"
_IO = "SW105"
_SLEEP = "SW106"

_EXACT: dict[str, str] = {
    # wall clock
    "time.time": _CLOCK,
    "time.time_ns": _CLOCK,
    "time.monotonic": _CLOCK,
    "time.monotonic_ns": _CLOCK,
    "time.perf_counter": _CLOCK,
    "time.perf_counter_ns": _CLOCK,
    "time.process_time": _CLOCK,
    "time.process_time_ns": _CLOCK,
    "time.clock_gettime": _CLOCK,
    "time.clock_gettime_ns": _CLOCK,
    "datetime.datetime.now": _CLOCK,
    "datetime.datetime.utcnow": _CLOCK,
    "datetime.datetime.today": _CLOCK,
    "datetime.date.today": _CLOCK,
    "pendulum.now": _CLOCK,
    "pendulum.today": _CLOCK,
    "arrow.now": _CLOCK,
    "arrow.utcnow": _CLOCK,
    # randomness
    "os.urandom": _RANDOM,
    "os.getrandom": _RANDOM,
    "uuid.uuid1": _RANDOM,
    "uuid.uuid4": _RANDOM,
    # environment
    "os.getenv": _ENV,
    "os.getenvb": _ENV,
    "os.putenv": _ENV,
    "os.unsetenv": _ENV,
    # threads and processes
    "threading.Thread": _THREAD,
    "threading.Timer": _THREAD,
    "_thread.start_new_thread": _THREAD,
    "asyncio.to_thread": _THREAD,
    # I/O
    "builtins.open": _IO,
    "builtins.input": _IO,
    "io.open": _IO,
    "os.open": _IO,
    "os.read": _IO,
    "os.write": _IO,
    "os.system": _IO,
    "os.popen": _IO,
    "os.remove": _IO,
    "os.unlink": _IO,
    "os.rename": _IO,
    "os.replace": _IO,
    "os.mkdir": _IO,
    "os.makedirs": _IO,
    "os.rmdir": _IO,
    "os.listdir": _IO,
    "os.scandir": _IO,
    "os.walk": _IO,
    "os.stat": _IO,
    "os.path.exists": _IO,
    "os.path.isfile": _IO,
    "os.path.isdir": _IO,
    "os.path.getsize": _IO,
    "os.path.getmtime": _IO,
    "glob.glob": _IO,
    "glob.iglob": _IO,
    "sqlite3.connect": _IO,
    "psycopg.connect": _IO,
    "psycopg.Connection.connect": _IO,
    "psycopg.AsyncConnection.connect": _IO,
    "psycopg2.connect": _IO,
    "asyncpg.connect": _IO,
    "asyncpg.create_pool": _IO,
    "aiosqlite.connect": _IO,
    "pymysql.connect": _IO,
    "aiomysql.connect": _IO,
    "mysql.connector.connect": _IO,
    "pymongo.MongoClient": _IO,
    "redis.Redis": _IO,
    "redis.StrictRedis": _IO,
    "redis.from_url": _IO,
    "redis.asyncio.Redis": _IO,
    "redis.asyncio.from_url": _IO,
    "sqlalchemy.create_engine": _IO,
    "sqlalchemy.ext.asyncio.create_async_engine": _IO,
    "asyncio.open_connection": _IO,
    "asyncio.open_unix_connection": _IO,
    "asyncio.start_server": _IO,
    "asyncio.create_subprocess_exec": _IO,
    "asyncio.create_subprocess_shell": _IO,
    "aiofiles.open": _IO,
    # non-durable sleeps
    "asyncio.sleep": _SLEEP,
    "time.sleep": _SLEEP,
    "trio.sleep": _SLEEP,
    "anyio.sleep": _SLEEP,
}

_PREFIXES: tuple[tuple[str, str], ...] = (
    ("random.", _RANDOM),
    ("secrets.", _RANDOM),
    ("numpy.random.", _RANDOM),
    ("concurrent.futures.", _THREAD),
    ("multiprocessing.", _THREAD),
    ("requests.", _IO),
    ("httpx.", _IO),
    ("aiohttp.", _IO),
    ("urllib.request.", _IO),
    ("urllib3.", _IO),
    ("http.client.", _IO),
    ("socket.", _IO),
    ("subprocess.", _IO),
    ("shutil.", _IO),
    ("smtplib.", _IO),
    ("ftplib.", _IO),
    ("boto3.", _IO),
    ("psycopg_pool.", _IO),
)

#: Clock functions that read the current time only when called without a time argument.
_CLOCK_WITHOUT_ARGS = {"time.localtime": 0, "time.gmtime": 0, "time.ctime": 0, "time.strftime": 1}

_ENV_VALUES = frozenset({"os.environ", "os.environb"})

#: pathlib methods that do file I/O, recognised by name whatever the receiver.
_IO_METHODS = frozenset({"read_text", "write_text", "read_bytes", "write_bytes"})

_ADVICE = {
    _CLOCK: "reads the clock in workflow code, so a resumed run sees another time; "
    "get the time from an activity (its result is recorded) or pass it as an argument",
    _RANDOM: "is random in workflow code, so a resumed run draws another value; "
    "draw it in an activity, or derive it from the workflow's arguments",
    _ENV: "touches environment variables in workflow code, which may differ in the process "
    "that resumes it; read configuration in an activity or pass it as an argument",
    _THREAD: "runs work outside the workflow's durable, ordered calls; "
    "put it in an activity (sync activities already run in the engine's thread pool)",
    _IO: "does I/O in workflow code: it runs again on every resume and its result is not "
    "recorded; move it into an activity",
}


def _advice(code: str, shown: str, name: str = "") -> str:
    """The message for a call written ``shown()`` (resolving to ``name``) under rule ``code``."""
    if code == _SLEEP:
        if name == "time.sleep":
            return (
                f"`{shown}()` blocks the event loop and is forgotten by a restart; "
                "use `await manager.sleep(seconds)`, a durable timer"
            )
        return (
            f"`{shown}()` is not durable: a restart forgets it and the wait starts over; "
            "use `await manager.sleep(seconds)`"
        )
    return f"`{shown}()` {_ADVICE[code]}"


def _call_rule(
    module: ModuleIndex, call: ast.Call, local: frozenset[str]
) -> tuple[str, str] | None:
    """(code, message) for a call that is non-deterministic in workflow code, or None."""
    func = call.func
    shown = _shown(func)
    name = module.resolve(func, local)
    if name in _PROCESS_DEPENDENT:
        return "SW108", _PROCESS_DEPENDENT[name]
    if name is not None:
        if name in _CLOCK_WITHOUT_ARGS:
            if len(call.args) <= _CLOCK_WITHOUT_ARGS[name]:
                return _CLOCK, _advice(_CLOCK, shown)
            return None
        code = _EXACT.get(name)
        if code is None:
            code = next((c for prefix, c in _PREFIXES if name.startswith(prefix)), None)
        if code is None:
            return None
        if code == _RANDOM and name == "random.Random" and (call.args or call.keywords):
            return None  # an explicitly seeded generator is deterministic
        if code == _SLEEP and _is_zero(call):
            return None  # asyncio.sleep(0) only yields to the event loop
        return code, _advice(code, shown, name)
    if isinstance(func, ast.Attribute):
        if func.attr in _IO_METHODS:
            return _IO, _advice(_IO, shown)
        if func.attr == "run_in_executor":
            return _THREAD, _advice(_THREAD, shown)
        if func.attr == "time" and isinstance(func.value, ast.Call):
            loop = module.resolve(func.value.func, local)
            if loop in {"asyncio.get_event_loop", "asyncio.get_running_loop"}:
                return _CLOCK, _advice(_CLOCK, shown)
    return None


_PROCESS_DEPENDENT = {
    "builtins.hash": (
        "`hash()` of str and bytes differs between processes (PYTHONHASHSEED), so a resumed "
        "workflow may decide differently; use a stable digest such as hashlib.sha256"
    ),
    "builtins.id": (
        "`id()` differs between processes and runs; never base workflow decisions or keys "
        "on it, use a value from the workflow's arguments"
    ),
}


def _shown(func: ast.expr) -> str:
    """The callee as written, shortened to ``....attr`` when it is a long expression."""
    text = ast.unparse(func)
    if len(text) > 40 and isinstance(func, ast.Attribute):
        return f"....{func.attr}"
    return text


def _is_zero(call: ast.Call) -> bool:
    arg = call.args[0] if call.args else None
    return isinstance(arg, ast.Constant) and arg.value == 0


# ---------------------------------------------------------------------------- set iteration

_SET_METHODS = frozenset({"union", "intersection", "difference", "symmetric_difference", "copy"})
_SET_OPS = (ast.BitOr, ast.BitAnd, ast.Sub, ast.BitXor)
#: Consumers whose result does not depend on iteration order.
_ORDER_FREE = frozenset({"sorted", "set", "frozenset", "sum", "min", "max", "any", "all", "len"})
#: Consumers that turn iteration order into an ordered value.
_ORDERED_CONSUMERS = frozenset({"list", "tuple", "enumerate", "zip", "iter", "map", "filter"})


class _SetTracker:
    """Which expressions of one function are sets (literal, set(), set algebra, set locals)."""

    def __init__(self, module: ModuleIndex, scope: Scope) -> None:
        self.module = module
        self.local = module.local_names(scope.fn)
        self.names = self._set_names(scope)

    def _set_names(self, scope: Scope) -> frozenset[str]:
        candidates: dict[str, bool] = {}
        args = scope.fn.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            candidates[arg.arg] = arg.annotation is not None and _is_set_annotation(arg.annotation)
        for node in walk_body(self.module, scope.fn):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store):
                            is_set = target is name and self.is_set(node.value, candidates)
                            candidates[name.id] = candidates.get(name.id, True) and is_set
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                is_set = _is_set_annotation(node.annotation) or (
                    node.value is not None and self.is_set(node.value, candidates)
                )
                candidates[node.target.id] = candidates.get(node.target.id, True) and is_set
            elif isinstance(node, ast.For | ast.AsyncFor | ast.With | ast.AsyncWith):
                targets = [node.target] if isinstance(node, ast.For | ast.AsyncFor) else []
                if isinstance(node, ast.With | ast.AsyncWith):
                    targets = [i.optional_vars for i in node.items if i.optional_vars]
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            candidates[name.id] = False
            elif isinstance(node, ast.NamedExpr):
                candidates[node.target.id] = False
        return frozenset(name for name, is_set in candidates.items() if is_set)

    def is_set(self, expr: ast.expr, names: dict[str, bool] | None = None) -> bool:
        if isinstance(expr, ast.Set | ast.SetComp):
            return True
        if isinstance(expr, ast.Name):
            if names is not None:
                return names.get(expr.id, False)
            return expr.id in self.names
        if isinstance(expr, ast.Call):
            func = expr.func
            if self.module.is_builtin(func, "set", self.local) or self.module.is_builtin(
                func, "frozenset", self.local
            ):
                return True
            if isinstance(func, ast.Attribute) and func.attr in _SET_METHODS:
                return self.is_set(func.value, names)
            return False
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, _SET_OPS):
            return self.is_set(expr.left, names) or (
                not isinstance(expr.op, ast.Sub) and self.is_set(expr.right, names)
            )
        return False


def _is_set_annotation(annotation: ast.expr) -> bool:
    node = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    if isinstance(node, ast.Attribute):
        return node.attr in {"Set", "AbstractSet", "FrozenSet", "MutableSet"}
    return isinstance(node, ast.Name) and node.id in {
        "set",
        "frozenset",
        "Set",
        "AbstractSet",
        "FrozenSet",
        "MutableSet",
    }


def _set_iterations(module: ModuleIndex, scope: Scope) -> Iterator[ast.expr]:
    """Set-valued expressions whose iteration order reaches the workflow's behaviour."""
    sets = _SetTracker(module, scope)
    for node in walk_body(module, scope.fn):
        if isinstance(node, ast.For | ast.AsyncFor) and sets.is_set(node.iter):
            yield node.iter
        elif isinstance(node, ast.ListComp | ast.GeneratorExp | ast.DictComp | ast.SetComp):
            if isinstance(node, ast.SetComp) and not _has_await(node.elt):
                continue  # builds another set: order does not leak unless it awaits
            if _order_free_argument(module, sets, node):
                continue
            for generator in node.generators:
                if sets.is_set(generator.iter):
                    yield generator.iter
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in _ORDERED_CONSUMERS:
                if not module.is_builtin(func, func.id, sets.local):
                    continue
                args = node.args if func.id in {"zip", "map", "filter"} else node.args[:1]
                yield from (arg for arg in args if sets.is_set(arg))
            elif (
                isinstance(func, ast.Attribute)
                and func.attr == "join"
                and node.args
                and sets.is_set(node.args[0])
            ):
                yield node.args[0]
            for arg in node.args:
                if isinstance(arg, ast.Starred) and sets.is_set(arg.value):
                    yield arg.value


def _order_free_argument(module: ModuleIndex, sets: _SetTracker, node: ast.expr) -> bool:
    """``sorted(x for x in s)``: the comprehension feeds an order-independent consumer."""
    parent = module.parents.get(node)
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name):
        name = parent.func.id
        return name in _ORDER_FREE and module.is_builtin(parent.func, name, sets.local)
    return False


def _has_await(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Await) for n in ast.walk(node))


# ---------------------------------------------------------------------------- the checks


def check_determinism(module: ModuleIndex) -> Iterator[Raw]:
    """SW101-SW108 over every workflow body and the helpers the workflows call."""
    for scope in workflow_scopes(module):
        local = module.local_names(scope.fn)
        for node in walk_body(module, scope.fn):
            if isinstance(node, ast.Call):
                found = _call_rule(module, node, local)
                if found is not None:
                    yield node, found[0], found[1] + scope.suffix()
            elif (
                isinstance(node, ast.Attribute | ast.Name)
                and isinstance(node.ctx, ast.Load)
                and module.resolve(node, local) in _ENV_VALUES
            ):
                yield node, _ENV, f"`os.environ` {_ADVICE[_ENV]}{scope.suffix()}"
        for expr in _set_iterations(module, scope):
            yield (
                expr,
                "SW107",
                (
                    "iterating a set: the order of str elements differs between processes (hash "
                    "seed), so a resumed workflow may make its durable calls in another order; "
                    f"iterate `sorted(...)` instead{scope.suffix()}"
                ),
            )
