"""Typed access to the tables of a TOML file, with errors that name the file, the line
and the key to fix (tomllib gives no line numbers, so they are found in the text)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from dbregress.errors import LabError


class TableReader:
    """Typed access to one TOML table that reports file, line and key on error."""

    def __init__(
        self, path: Path, text: str, table: str, data: dict[str, Any], scope: str = ""
    ) -> None:
        self.path, self.text, self.table, self.data = path, text, table, data
        self.scope = scope  # the [[comparison]] block this table sits in, e.g. "comparison[1]"
        self.used: set[str] = set()

    def child(self, table: str, data: dict[str, Any]) -> TableReader:
        name = f"{self.table}.{table}" if self.table else table
        return TableReader(self.path, self.text, name, data, self.scope or self.table)

    def fail(self, key: str | None, message: str) -> LabError:
        where = f"{self.path}:{_line_of(self.text, self.table, key)}"
        dotted = ".".join(p for p in (self.table, key) if p)
        return LabError(f"{where}: {dotted or 'lab'}: {message}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        self.used.add(key)
        if key not in self.data:
            return default
        value = self.data[key]
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.fail(key, f"expected {_kind_name(kind)}, got a boolean")
        if not isinstance(value, kind):
            raise self.fail(key, f"expected {_kind_name(kind)}, got {type(value).__name__}")
        return value

    def positive(self, key: str, default: float, integer: bool = True) -> Any:
        value = self.get(key, int if integer else (int, float), default)
        if value is not None and value <= 0:
            raise self.fail(key, f"must be greater than 0, got {value}")
        return value

    def require(self, key: str, kind: type) -> Any:
        if key not in self.data:
            raise self.fail(None, f"missing required key {key!r}")
        return self.get(key, kind)

    def reject_unknown(self) -> None:
        for key in self.data:
            if key not in self.used:
                known = ", ".join(sorted(self.used))
                raise self.fail(key, f"unknown key {key!r} (known here: {known})")


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
        bool: "true or false",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _line_of(text: str, table: str, key: str | None) -> int:
    """Line number of `key` in the table at a path like `comparison[1].column[0]`, or of
    the table's header; 1 if unknown."""
    lines = text.splitlines()
    header = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\-]+)\s*\]\]?")
    names = [m.group(1) if (m := header.match(ln)) else None for ln in lines]
    lo, hi, found, full = 0, len(lines), 0, ""
    for segment in filter(None, table.split(".")):
        name, _, index = segment.partition("[")
        full = f"{full}.{name}" if full else name
        starts = [i for i in range(lo, hi) if names[i] == full]
        pick = int(index.rstrip("]")) if index else 0
        if pick >= len(starts):  # an inline table: point at its `name = {...}` line
            return _key_line(lines, names, lo, hi, name, full.rpartition(".")[0]) or found or 1
        lo = starts[pick]
        found = lo + 1
        nxt = [
            i
            for i in range(lo + 1, hi)
            if names[i] is not None
            and (names[i] == full or not str(names[i]).startswith(full + "."))
        ]
        hi = nxt[0] if nxt else hi
    return (_key_line(lines, names, lo, hi, key, full) if key else None) or found or 1


def _key_line(
    lines: list[str], names: list[str | None], lo: int, hi: int, key: str, table: str
) -> int | None:
    current = names[lo] if names[lo] is not None and table else ""
    for i in range(lo, hi):
        if names[i] is not None:
            current = names[i] or ""
            continue
        if current == table and re.match(rf"^\s*{re.escape(key)}\s*=", lines[i]):
            return i + 1
    return None
