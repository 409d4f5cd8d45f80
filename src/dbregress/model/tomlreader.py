"""Typed access to the tables of a TOML file, with errors that name the file, the line
and the key to fix (tomllib gives no line numbers, so they are found in the text)."""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path
from typing import Any

from dbregress.model.errors import LabError

# TOML integers are 64-bit; tomllib accepts more, which would overflow later (float(),
# the loadgen's u64 fields, time.sleep), so a value outside this range is an error.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
# Durations longer than this are typos, and much longer ones overflow time.sleep().
MAX_SECONDS = 1_000_000

# A TOML table as tomllib returns it, before a TableReader has checked its keys and
# types: the one place a record is untyped by nature (a parsed lab, study or flavor is
# a dataclass).
TomlTable = dict[str, Any]


def read_toml(path: Path, what: str = "lab file") -> tuple[str, TomlTable]:
    """The text and the tables of a TOML file; LabError naming the file and the line
    for anything that is not UTF-8 TOML."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise LabError(f"cannot read {what} {path}: {e.strerror or e}") from e
    except ValueError as e:  # a path with a NUL byte
        raise LabError(f"cannot read {what} {path!r}: {e}") from e
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")  # editors may add a BOM
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise LabError(
            f"{path}:{line}: not UTF-8 text (byte {raw[e.start]:#04x}); save the {what} as UTF-8"
        ) from e
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise LabError(f"{path}: not valid TOML: {e}") from e
    except RecursionError as e:
        raise LabError(
            f"{path}: not valid TOML: arrays or inline tables nested too deeply; "
            "a lab needs at most three levels"
        ) from e
    except ValueError as e:  # an integer of thousands of digits (int()'s digit limit)
        m = re.search(r"[0-9_]{1000,}", text)
        line = text.count("\n", 0, m.start()) + 1 if m else 1
        raise LabError(
            f"{path}:{line}: not valid TOML: a number with thousands of digits; "
            "TOML integers are 64-bit"
        ) from e


class TableReader:
    """Typed access to one TOML table that reports file, line and key on error."""

    def __init__(self, path: Path, text: str, table: str, data: TomlTable, scope: str = "") -> None:
        self.path, self.text, self.table, self.data = path, text, table, data
        self.scope = scope  # the [[comparison]] block this table sits in, e.g. "comparison[1]"
        self.used: set[str] = set()

    def child(self, table: str, data: TomlTable) -> TableReader:
        name = f"{self.table}.{table}" if self.table else table
        return TableReader(self.path, self.text, name, data, self.scope or self.table)

    def fail(self, key: str | None, message: str) -> LabError:
        where = f"{self.path}:{_line_of(self.text, self.table, key)}"
        dotted = ".".join(p for p in (self.table, key) if p)
        return LabError(f"{where}: {dotted or 'lab'}: {message}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        """The value of `key` if it has type `kind` (a bool is not an int here), else
        `default`; any integer in it must fit in 64 bits and any float be finite."""
        self.used.add(key)
        if key not in self.data:
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            hint = " (write [[table]] for a list of tables)" if list in kinds else ""
            raise self.fail(key, f"expected {_kind_name(kind)}, got {value_name(value)}{hint}")
        self.check_numbers(key, value)
        return value

    def check_numbers(self, key: str, value: Any) -> None:
        """Integers must fit in 64 bits and floats be finite, also in lists; a table in
        the value is left to its own reader, which names its own keys."""
        stack = [value]
        while stack:  # not recursive: TOML may nest deeper than Python's stack
            item = stack.pop()
            if isinstance(item, list):
                stack.extend(item)
            elif isinstance(item, float) and not math.isfinite(item):
                raise self.fail(key, f"{item} is not allowed here; write a finite number")
            elif isinstance(item, int) and not INT_MIN <= item <= INT_MAX:
                raise self.fail(
                    key, "an integer out of range; TOML integers are 64-bit (at most 2**63-1)"
                )

    def positive(self, key: str, default: float | None, integer: bool = True) -> Any:
        """A number > 0; a float one (a duration in seconds) also at most MAX_SECONDS."""
        if integer:
            return self.number(key, default, low=0, low_open=True, integer=True)
        return self.number(key, default, low=0, low_open=True, high=MAX_SECONDS)

    def number(
        self,
        key: str,
        default: float | None,
        *,
        low: float | None = None,
        high: float | None = None,
        low_open: bool = False,
        integer: bool = False,
    ) -> Any:
        """A number in [low, high] (or (low, high] with low_open): an int if `integer`,
        else a float; `default` (unchecked) when the key is absent."""
        value = self.get(key, int if integer else (int, float), None)
        if value is None:
            return default
        too_low = low is not None and (value <= low if low_open else value < low)
        if too_low or (high is not None and value > high):
            raise self.fail(key, f"must be {_range_text(low, high, low_open)}, got {value}")
        return value if integer else float(value)

    def require(self, key: str, kind: type) -> Any:
        if key not in self.data:
            raise self.fail(None, f"missing required key {key!r}")
        return self.get(key, kind)

    def reject_unknown(self) -> None:
        for key in self.data:
            if key not in self.used:
                known = ", ".join(sorted(self.used))
                raise self.fail(key, f"unknown key {key!r} (known here: {known})")


def _range_text(low: float | None, high: float | None, low_open: bool) -> str:
    parts = []
    if low is not None:
        parts.append(f"greater than {_num(low)}" if low_open else f"{_num(low)} or more")
    if high is not None:
        parts.append(f"at most {_num(high)}")
    return " and ".join(parts)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


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


def short(value: Any, width: int = 60) -> str:
    """The repr of a value a user wrote, cut to `width` characters for a message."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def value_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    kinds: tuple[tuple[type, str], ...] = (
        (int, "an integer"),
        (float, "a float"),
        (str, "a string"),
        (dict, "a table"),
        (list, "a list"),
    )
    for kind, name in kinds:
        if isinstance(value, kind):
            return name
    return type(value).__name__  # a TOML date, time or datetime


def _line_of(text: str, table: str, key: str | None) -> int:
    """Line number of `key` in the table at a path like `comparison[1].column[0]`, or of
    the table's header; 1 if unknown."""
    lines = text.split("\n")  # TOML's lines (str.splitlines also splits at \x0c, \u2028...)
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
    current = names[lo] if lo < len(names) and names[lo] is not None and table else ""
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for i in range(lo, hi):
        if names[i] is not None:
            current = names[i] or ""
            continue
        if current == table and pattern.match(lines[i]):
            return i + 1
    return None
