"""Which source files import which, for src/dbregress (Python) and loadgen/src (Rust),
the cycles among them, and the layers of src/dbregress. `make test` fails on a cycle
between files or between packages, or on an import that goes up a layer
(tests/unit/test_import_graph.py): imports point down, so a module can be read, tested
and replaced from the bottom up.

    python3 tools/import_graph.py     # prints each cycle and upward import; exit 1 if any

The layers of src/dbregress are LAYERS below, top first. src/dbregress holds packages
only, each one unit; a unit may import its own files, units of lower layers, and units
of its own layer as long as no cycle forms between units. docs/architecture.md draws
them.

Python: every `import` and `from ... import` anywhere in a file (inside functions too),
except under `if TYPE_CHECKING:`. Rust: every `crate::`, `super::` and `self::` path and
every path through one of the file's own `mod` children, outside `#[cfg(test)]` modules;
a `mod.rs` or `main.rs` naming its own children is how Rust builds the tree, not an edge.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
Graph = dict[Path, set[Path]]

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("commands", ("cli",)),
    ("studies", ("study",)),
    ("workflows", ("bisect", "workflow")),
    ("lanes, fleet, reports", ("cost", "explain", "fleet", "report", "site")),
    ("execution, storage, analysis", ("execution", "store", "analysis", "imports")),
    ("benchmarks", ("benchmarks",)),
    ("the lab", ("lab",)),
    (
        "engines, builds, collectors, configs",
        ("engines", "provision", "collect", "configs", "loadgen", "method"),
    ),
    ("model", ("model", "shapes", "__init__")),
)


def python_graph(src: Path) -> Graph:
    modules: dict[str, Path] = {}
    for path in src.rglob("*.py"):
        parts = path.relative_to(src).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: Graph = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                node.body = []
        targets: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = [*base, *(node.module or "").split(".")] if node.module else base
                targets.add(".".join(module))
                targets.update(".".join([*module, a.name]) for a in node.names)
        graph[path] = {
            modules[t]
            for t in targets
            if t in modules and modules[t] != path and modules[t].name != "__init__.py"
        }
    return graph


TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{.*", re.S)
CHILD = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.M)
PATH = re.compile(r"\b(crate|super|self)((?:::\w+)+)")
LOCAL = re.compile(r"(?<![:\w])(\w+)::\w")


def rust_graph(src: Path) -> Graph:
    def module_of(path: Path) -> tuple[str, ...]:
        parts = path.relative_to(src).with_suffix("").parts
        return parts[:-1] if parts[-1] in ("mod", "main", "lib") else parts

    files = {module_of(p): p for p in src.rglob("*.rs")}

    def file_of(parts: tuple[str, ...]) -> Path | None:
        while parts and parts not in files:
            parts = parts[:-1]
        return files.get(parts) if parts else None

    graph: Graph = {}
    for me, path in files.items():
        text = TEST_MODULE.sub("", re.sub(r"//[^\n]*", "", path.read_text()))
        children = set(CHILD.findall(text))
        found: set[Path | None] = set()
        for head, rest in PATH.findall(text):
            base = {"crate": (), "super": me[:-1], "self": me}[head]
            found.add(file_of(base + tuple(rest.split("::")[1:])))
        for name in LOCAL.findall(text):
            if name in children:
                found.add(file_of((*me, name)))
        facade = path.name in ("mod.rs", "main.rs", "lib.rs")
        graph[path] = {
            t
            for t in found
            if t is not None and t != path and not (facade and module_of(t)[:-1] == me)
        }
    return graph


def cycles(graph: Graph) -> list[list[Path]]:
    """Strongly connected components of more than one file (Tarjan, iterative)."""
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on_stack: set[Path] = set()
    found: list[list[Path]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def all_cycles(root: Path = ROOT) -> list[list[Path]]:
    return cycles(python_graph(root / "src")) + cycles(rust_graph(root / "loadgen" / "src"))


def unit_of(path: Path, package: Path) -> str:
    """The unit a file of `package` belongs to: its subpackage or top-level module."""
    return path.relative_to(package).with_suffix("").parts[0]


def layer_problems(
    root: Path = ROOT, layers: tuple[tuple[str, tuple[str, ...]], ...] = LAYERS
) -> tuple[list[str], list[str], list[list[str]]]:
    """(upward imports as "file -> file", units in no layer, cycles between units)."""
    package = root / "src" / "dbregress"
    graph = python_graph(root / "src")
    level = {u: i for i, (_, units) in enumerate(layers) for u in units}
    up: list[str] = []
    unknown: set[str] = set()
    units: Graph = {}
    for a, targets in sorted(graph.items()):
        ua = unit_of(a, package)
        units.setdefault(Path(ua), set())
        if ua not in level:
            unknown.add(ua)
        for b in sorted(targets):
            ub = unit_of(b, package)
            if ub != ua:
                units[Path(ua)].add(Path(ub))
            if ua in level and ub in level and level[ub] < level[ua]:
                up.append(f"{a.relative_to(root)} -> {b.relative_to(root)}")
    between = [[str(u) for u in c] for c in cycles(units)]
    return up, sorted(unknown), between


def main() -> int:
    found = all_cycles()
    for component in found:
        print("cycle:", " <-> ".join(str(p.relative_to(ROOT)) for p in component))
    up, unknown, between = layer_problems()
    for edge in up:
        print("upward import:", edge)
    for unit in unknown:
        print("in no layer:", unit, "(add it to LAYERS in tools/import_graph.py)")
    for component in between:
        print("cycle between packages:", " <-> ".join(component))
    print(
        f"{len(found)} import cycle(s) between files, {len(between)} between packages, "
        f"{len(up)} upward import(s), {len(unknown)} unit(s) in no layer"
    )
    return 1 if found or up or unknown or between else 0


if __name__ == "__main__":
    sys.exit(main())
