"""The shape of the code, read with the AST: DESIGN's layers, no import loop, no over-long function.

These are checks of the source text, not of behaviour: each walks every module of the five packages.

- Layers (DESIGN.md): ``cli -> workloads -> solvers -> fabric`` and ``cli -> topologies -> fabric``;
  ``fabric`` imports nothing else of the project, and ``topologies`` and ``solvers`` do not import each
  other.  Imports inside functions count (an import put in a function to dodge a loop is still an edge);
  imports under ``if TYPE_CHECKING:`` do not (they never run).
- No import loop: the module graph (same edges) has no cycle, so every module can be imported first.
- No function longer than :data:`MAX_LINES` lines of code (its docstring not counted: the standards ask for
  numpydoc docstrings with examples, and those should never push a function over) unless a comment inside it
  starts with ``# long:`` and says why.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("fabric", "topologies", "solvers", "workloads", "cli")
ALLOWED = {  # package -> the project packages it may import
    "fabric": set(),
    "topologies": {"fabric"},
    "solvers": {"fabric"},
    "workloads": {"solvers", "fabric"},
    "cli": {"workloads", "solvers", "topologies", "fabric"},
}
MAX_LINES = 80
NOT_OURS: tuple[str, ...] = ()
"""Folders exempt from the length rule (none: every package is held to it)."""


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module that ``import name`` runs (the longest known prefix), or None for a library."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def _imports(module: str, path: pathlib.Path) -> set[str]:
    """Project modules ``module`` imports, at any depth (functions included), relative imports resolved."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_nodes(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(filter(None, (_resolve(a.name) for a in node.names)))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                target = full if full in MODULES else _resolve(base)
                if target:
                    out.add(target)
    out.discard(module)
    return out


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_a_loop():
    """The check can fail: a two-module loop and a three-module loop are found, a chain is not."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert sorted(_cycles(graph)) == [["a", "b"], ["c", "d", "e"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_imports_inside_functions_are_edges():
    assert "cli.study.metrics" in GRAPH["cli.study.evaluator"]
    assert "solvers.orchestrator" in GRAPH["cli.study.metrics"]  # imported lazily, inside the adapter


def test_no_import_loop():
    assert _cycles(GRAPH) == []


def test_imports_follow_the_layers():
    bad = []
    for module, targets in GRAPH.items():
        pkg = module.split(".")[0]
        for t in targets:
            other = t.split(".")[0]
            if other != pkg and other not in ALLOWED[pkg]:
                bad.append(f"{module} -> {t}")
    assert not bad, bad


def _long_functions() -> list[str]:
    out = []
    for module, path in MODULES.items():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(NOT_OURS):
            continue
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            n = node.end_lineno - node.lineno + 1
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                n -= body[0].end_lineno - body[0].lineno + 1
            if n <= MAX_LINES:
                continue
            if any(ln.strip().startswith("# long:") for ln in lines[node.lineno - 1:node.end_lineno]):
                continue
            out.append(f"{rel}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_long_function_without_a_reason():
    assert _long_functions() == []
