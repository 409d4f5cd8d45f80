"""Modules, classes and functions of src/dbregress longer than the house allows: a
module of more than 500 lines, a class of more than 250 or a function of more than 60 is
doing more than one thing, and is split where its parts have names of their own. Lines
are the file's lines, or the node's span in the source, docstring and comments included.
It also counts the untyped records, `dict[str, Any]` in src/dbregress: a record gets its
TypedDict or dataclass in shapes/, and only boundaries that are untyped by nature (JSON
or TOML as a parser returns it, model.tomlreader.TomlTable) keep one; at most 15.

    python3 tools/sizes.py     # prints each one that is too long; exit 1 if any (make lint)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULE = 500
MAX_CLASS = 250
MAX_FUNCTION = 60
MAX_UNTYPED = 15
UNTYPED = "dict[str, Any]"


def too_long(src: Path) -> list[tuple[str, int, int]]:
    """(where, lines, limit) of every class and function over its limit, longest first."""
    found = []
    for path in sorted(src.rglob("*.py")):
        text = path.read_text()
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        if text.count("\n") > MAX_MODULE:
            found.append((f"{shown} (module)", text.count("\n"), MAX_MODULE))
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                limit = MAX_CLASS
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                limit = MAX_FUNCTION
            else:
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                where = f"{shown}:{node.lineno} {node.name}"
                found.append((where, lines, limit))
    return sorted(found, key=lambda f: -f[1])


def untyped(src: Path) -> list[str]:
    """file:line of every `dict[str, Any]` under src."""
    return [
        f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{number}"
        for path in sorted(src.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if UNTYPED in line
    ]


def main() -> int:
    found = too_long(ROOT / "src" / "dbregress")
    for where, lines, limit in found:
        print(f"{where}: {lines} lines (at most {limit})")
    print(f"{len(found)} module(s), class(es) or function(s) too long")
    loose = untyped(ROOT / "src" / "dbregress")
    print(f"{len(loose)} untyped records ({UNTYPED}; at most {MAX_UNTYPED})")
    if len(loose) > MAX_UNTYPED:
        print("\n".join(loose))
    return 1 if found or len(loose) > MAX_UNTYPED else 0


if __name__ == "__main__":
    sys.exit(main())
