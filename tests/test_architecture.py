"""Imports point one way: the layer table of ARCHITECTURE.md, checked on every module's AST.

A *group* is a top-level module (``lovia.errors``) or subpackage (``lovia.view``); the package
root ``lovia/__init__.py`` is the group ``lovia``. ``LAYERS`` lists the groups from the bottom
up: a module may import its own group and any group listed ABOVE its own, never one below.
Imports under ``if TYPE_CHECKING:`` are collected too, and may point upward only when
``TYPE_ONLY`` names the edge (they cost nothing at run time but still tie the types together).
The engine ``_loop`` is private: only ``ENGINE_USERS`` import it; everything else goes through
the facade (``Runner``, ``RunResult``, ``lovia.lease_ttl`` ...).
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "lovia"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "core types",
        (
            "_version",
            "_lazy",
            "errors",
            "_redact",
            "_files",
            "_imports",
            "usage",
            "_price_file",
            "pricing",
            "labels",
            "spend",
        ),
    ),
    ("core types", ("transcript", "events", "_observers", "_display", "model")),
    ("building blocks", ("context", "output", "guardrails", "telemetry", "hooks", "tools")),
    ("building blocks", ("providers", "stores", "_defaults", "view", "plugins", "result", "agent")),
    ("engine", ("_loop",)),
    ("facade", ("runner", "agent_tool", "lovia")),
    ("applications", ("replay", "evals", "web", "cli", "workers", "integrations", "testing")),
)
"""Bottom-up; the two rows of a layer name are one list, split to keep lines short."""

ORDER: tuple[str, ...] = tuple(group for _, groups in LAYERS for group in groups)

ENGINE_USERS: dict[str, str] = {
    "runner": "the facade drives the one loop",
    "agent_tool": "a child run is the engine run again, linked to its parent",
    "replay": "a what-if re-sends a recorded request through the one model-call path",
}
"""Groups that may import the private engine ``_loop``, each with why."""

TYPE_ONLY: dict[tuple[str, str], str] = {
    ("context", "agent"): "RunContext.agent is typed as the Agent the tools see",
    ("stores", "view"): "the typed view checkpoint record (stores.records.ViewNote) holds a "
    "view.record.ViewRecord",
    ("result", "agent"): "RunResult.final_agent is typed as an Agent",
}
"""Upward edges allowed under ``TYPE_CHECKING`` only, each with why."""

DEFERRED: dict[tuple[str, str], str] = {
    ("stores", "view"): "reading a view checkpoint record builds a ViewRecord; the stores "
    "themselves keep record payloads opaque",
}
"""Upward edges allowed only as an import inside a function (run on first call), with why."""


@dataclass(frozen=True)
class Edge:
    source: str  # module, e.g. lovia._loop.state
    target: str
    line: int
    type_only: bool
    deferred: bool


def group_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "lovia"


def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules(src: Path = SRC) -> dict[str, Path]:
    return {module_name(p, src): p for p in sorted(src.rglob("*.py"))}


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(n) for n in ast.walk(node))
    return inside


def _function_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inside.update(id(n) for n in ast.walk(node) if n is not node)
    return inside


@functools.cache
def import_edges(src: Path = SRC) -> list[Edge]:
    """Every import of a ``lovia`` module by a ``lovia`` module (``from pkg import submodule``
    counts as importing the submodule)."""
    modules = all_modules(src)
    edges: list[Edge] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        type_only, deferred = _type_checking_nodes(tree), _function_nodes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _resolve(module, path.name == "__init__.py", node)
                names = [f"{base}.{a.name}" for a in node.names]
                targets = [n for n in names if n in modules] or [base]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                if target == "lovia" or target.startswith("lovia."):
                    tc, late = id(node) in type_only, id(node) in deferred
                    edges.append(Edge(module, target, node.lineno, tc, late))
    return edges


def violations(src: Path = SRC) -> list[str]:
    rank = {group: i for i, group in enumerate(ORDER)}
    found: list[str] = []
    for e in import_edges(src):
        low, dst = group_of(e.source), group_of(e.target)
        where = f"{e.source}:{e.line} imports {e.target}"
        if low == dst:
            continue
        if dst == "_loop" and low not in ENGINE_USERS:
            found.append(f"{where}: only {sorted(ENGINE_USERS)} may import the engine")
        elif rank[dst] > rank[low]:
            if e.type_only and (low, dst) in TYPE_ONLY:
                continue
            if e.deferred and (low, dst) in DEFERRED:
                continue
            kind = " (under TYPE_CHECKING)" if e.type_only else ""
            found.append(f"{where}{kind}: {low} is below {dst} in LAYERS")
    return found


def test_every_module_belongs_to_a_layer() -> None:
    groups = {group_of(m) for m in all_modules()}
    assert groups - set(ORDER) == set(), "add it to LAYERS and ARCHITECTURE.md"
    assert set(ORDER) - groups == set(), "LAYERS names a group that no longer exists"
    assert len(ORDER) == len(set(ORDER))


def test_imports_point_one_way() -> None:
    assert violations() == []


def test_allowed_upward_edges_are_still_needed() -> None:
    """An exception whose import is gone must leave the table (no dead permissions)."""
    used = {(group_of(e.source), group_of(e.target)) for e in import_edges()}
    assert set(TYPE_ONLY) - used == set()
    assert set(DEFERRED) - used == set()
    users = {group_of(e.source) for e in import_edges() if group_of(e.target) == "_loop"}
    assert set(ENGINE_USERS) - users == set()


def test_the_checker_sees_what_it_must() -> None:
    """The AST walk resolves relative imports and tells type-only and deferred imports apart."""
    edges = {(e.source, e.target): e for e in import_edges()}
    assert ("lovia._loop.lease", "lovia.errors") in edges  # `from ..errors import ...`
    assert ("lovia.telemetry.tracer", "lovia.events") in edges  # `from .. import events`
    assert edges[("lovia.agent", "lovia.context")].type_only
    assert edges[("lovia.result", "lovia.output")].deferred  # `from .output import` in a def


def test_the_checker_flags_each_kind_of_violation(tmp_path: Path) -> None:
    """A made-up package with one violation of each kind, and allowed imports beside them."""
    files = {
        "__init__.py": "",
        "_loop/__init__.py": "from .. import events\n",  # a submodule, not the facade
        "_loop/state.py": "from ..runner import DEFAULT_MAX_TURNS\n",  # engine -> facade
        "workers/worker.py": "from .._loop.lease import lease_ttl\n",  # app -> private engine
        "tools/tool.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from ..providers import Provider\n"  # type-only, not allowed
        ),
        "context.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from .agent import Agent\n"  # type-only, allowed
        ),
        "stores/records.py": "def f():\n    from ..view.record import ViewRecord\n",  # allowed
        "hooks.py": "def f():\n    from .runner import Runner\n",  # deferred, not allowed
        "events.py": "",
        "runner.py": "import lovia._loop\n",  # the facade drives the engine
    }
    for name, text in files.items():
        path = tmp_path / "lovia" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    found = violations(tmp_path / "lovia")
    assert [v.split(":")[0] for v in found] == [
        "lovia._loop.state",
        "lovia.hooks",
        "lovia.tools.tool",
        "lovia.workers.worker",
    ]
    assert "(under TYPE_CHECKING)" in found[2]
    assert "only ['agent_tool', 'replay', 'runner'] may import the engine" in found[3]


def test_architecture_md_states_the_same_table() -> None:
    """ARCHITECTURE.md's layer table lists exactly LAYERS, in order, and names this test."""
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert "tests/test_architecture.py" in text
    rows = re.findall(r"^\| *`([\w.]+)` *\|", text, flags=re.MULTILINE)
    documented = ["lovia" if r == "lovia" else r.removeprefix("lovia.") for r in rows]
    assert documented == list(ORDER)
    for group in ENGINE_USERS:
        assert re.search(rf"`{re.escape(group)}`[^\n]*`_loop`", text), group


PRIVATE_IMPORTS: dict[tuple[str, str], str] = {
    ("cli", "lovia.evals._report"): "the report formats of `lovia eval` (JSON, JUnit, rows) "
    "are the CLI's own, not yet a public API of lovia.evals",
}
"""Private modules of a package imported from outside it, each with why."""


def private_imports(src: Path = SRC) -> list[str]:
    """Imports of a package's private module (``lovia.replay._query``) from outside it."""
    found: list[str] = []
    for e in import_edges(src):
        parts = e.target.split(".")
        private = next((i for i, p in enumerate(parts) if i >= 2 and p.startswith("_")), None)
        if private is None:
            continue
        package = ".".join(parts[:private])
        inside = e.source == package or e.source.startswith(package + ".")
        if not inside and (group_of(e.source), e.target) not in PRIVATE_IMPORTS:
            found.append(f"{e.source}:{e.line} imports {e.target}, private to {package}")
    return found


def test_private_modules_stay_inside_their_package() -> None:
    """The CLI and the web app use ``lovia.replay``'s public names, never ``replay._query``."""
    assert private_imports() == []
    used = {(group_of(e.source), e.target) for e in import_edges()}
    assert set(PRIVATE_IMPORTS) - used == set()


def test_the_private_import_check_flags_a_reach_inside(tmp_path: Path) -> None:
    files = {
        "__init__.py": "",
        "replay/__init__.py": "from ._query import run_dict\n",  # its own package: fine
        "replay/_query.py": "",
        "web/_list.py": "from ..replay._query import run_dict\n",
        "cli/_runs.py": "from ..replay import run_dict\n",
    }
    for name, text in files.items():
        path = tmp_path / "lovia" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    found = private_imports(tmp_path / "lovia")
    assert found == ["lovia.web._list:1 imports lovia.replay._query, private to lovia.replay"]


CYCLES: dict[tuple[str, str], str] = {
    ("lovia.context", "lovia.agent"): "RunContext.agent is the Agent the tools see, and an "
    "Agent's tools, guardrails, plugins and instructions take a RunContext: types that name "
    "each other (under TYPE_CHECKING; no import at run time)",
    ("lovia.result", "lovia.agent"): "RunResult.final_agent is an Agent, and Agent.as_tool's "
    "output= callback takes a RunResult (under TYPE_CHECKING only)",
    ("lovia._loop.state", "lovia._loop.share"): "a run's Runtime holds its BudgetShare and the "
    "share's methods take the RunState (under TYPE_CHECKING only; the engine is private)",
}
"""The import edges that close a cycle, each with why; with them left out, the import
graph of ``src/lovia`` (type-only and deferred imports included) has no cycle."""


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Module -> the lovia modules it imports (every kind of import)."""
    graph: dict[str, set[str]] = {m: set() for m in all_modules(src)}
    for e in import_edges(src):
        if e.target in graph and e.target != e.source:
            graph[e.source].add(e.target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative),
    largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            nxt = next(targets, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def test_no_import_cycle_but_the_listed_ones() -> None:
    """Counting type-only and deferred imports: every cycle is closed by a listed edge."""
    graph = import_graph()
    for source, target in CYCLES:
        graph[source].discard(target)
    assert cycles(graph) == []


def test_listed_cycles_are_still_cycles_and_type_only() -> None:
    """A listed edge must still close a cycle (no dead permissions) and cost nothing at
    run time: every import behind it is under TYPE_CHECKING."""
    graph = import_graph()
    knots = cycles(graph)
    for source, target in CYCLES:
        assert any(source in k and target in k for k in knots), (source, target)
    for e in import_edges():
        if (e.source, e.target) in CYCLES:
            assert e.type_only, f"{e.source}:{e.line} imports {e.target} at run time"


def test_the_cycle_finder_finds_each_knot() -> None:
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},
        "d": set(),
        "e": {"f"},
        "f": {"e"},
        "g": {"g"},
    }
    assert cycles(graph) == [["a", "b", "c"], ["e", "f"]]
    assert cycles({"x": {"y"}, "y": set()}) == []
