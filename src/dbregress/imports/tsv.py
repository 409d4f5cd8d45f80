"""A table of Q per step and build, as published in benchmark reports:

    col-1 : <build description>
    col-2 : <build description>

    col-1   col-2
    4012    3876    point-query
    2210    2301    insert

A legend line per column, an optional header naming the columns, then one row per step:
a value per column (tab- or space-separated, `-` where a column has none) and the step's
name last. Each column becomes a column of the run, labelled by its description; the
first is the base. With a `Relative to: <build>` line the values are ratios to that
build: it becomes the base, with 1 for every step, and Q's unit is `relative`.

Groups: a header may end in `-> <group name>`, and the rows after it (up to the next
header) belong to that group:

    col-1   col-2   -> point queries
    0.97    0.91    point-query_range=100
    col-1   col-2   -> range queries
    0.88    0.85    scan_range=100

A group header names the columns as a plain header does (they must match the legend);
a plain header ends the group, and rows before any group header have none. Each step
records its group in its detail (`group`, stored under `imported` in the step's result).
A step appears once per group. A step name that appears in two or more groups gets its
group as a suffix after `@` in each of those groups, the group made a safe name as
columns are (`point-query@point_queries` and `point-query@range_queries`; a row of it
outside any group keeps the bare name); every other step keeps its name as printed, so
a table without groups, or whose groups hold distinct steps, names its steps as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dbregress.imports.common import Measured, Repeat, bad, lines, number, safe_name

LEGEND = re.compile(r"(col-\d+)\s*:\s*(\S.*)")
RELATIVE = re.compile(r"Relative to:\s*(\S.*)")
MISSING = "-"
GROUP = "->"  # a header's columns, then `->` and the name of the group of the next rows
GROUP_JOIN = "@"  # step@group: a step name that two groups hold


@dataclass(frozen=True)
class _Row:
    step: str  # as printed (made a safe name)
    group: str | None  # as printed (blanks collapsed), None outside any group
    values: dict[str, float]  # col-N -> value; a `-` column is absent
    line: int


def parse(text: str, source: str) -> list[Repeat]:
    legend: dict[str, str] = {}  # col-N -> description
    base: str | None = None
    rows: list[_Row] = []
    group: str | None = None
    seen: set[tuple[str | None, str]] = set()  # (group, step)
    for no, raw in lines(text):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        tokens = line.split()
        if relative := RELATIVE.fullmatch(line):
            if base is not None or rows:
                raise bad(source, no, "a second table; import one table per file")
            base = relative.group(1).strip()
        elif entry := LEGEND.fullmatch(line):
            if rows:
                raise bad(source, no, "a legend line after the rows; import one table per file")
            legend[entry.group(1)] = entry.group(2).strip()
        elif (header := _group_header(line)) is not None:
            columns, name = header
            _check_header(columns, legend, source, no)
            if not name:
                raise bad(source, no, f"a group header without a group name after {GROUP!r}")
            safe_name(name, source, no, "group name")
            group = name
        elif all(t.startswith("col-") for t in tokens):
            _check_header(tokens, legend, source, no)
            group = None
        else:
            _check_legend(legend, source, no)
            row = _row(tokens, legend, group, source, no)
            if (group, row.step) in seen:
                where = f" in group {group!r}" if group is not None else ""
                raise bad(source, no, f"step {row.step!r} has a row already{where}")
            seen.add((group, row.step))
            rows.append(row)
    if not rows:
        raise bad(source, None, "no row of values (a value per column, then the step's name)")
    return _repeats(legend, base, rows, _step_names(rows, source), source)


def _group_header(line: str) -> tuple[list[str], str] | None:
    """(columns, group name) of a `col-1 col-2 -> name` line, None for any other line
    (a row whose step name holds `->` has values, not columns, before it)."""
    head, arrow, name = line.partition(GROUP)
    columns = head.split()
    if not arrow or not all(c.startswith("col-") for c in columns):
        return None
    return columns, " ".join(name.split())


def _check_header(columns: list[str], legend: dict[str, str], source: str, no: int) -> None:
    _check_legend(legend, source, no)
    if columns != list(legend):
        raise bad(source, no, f"the header names {columns}, the legend {list(legend)}")


def _check_legend(legend: dict[str, str], source: str, no: int) -> None:
    expected = [f"col-{i}" for i in range(1, len(legend) + 1)]
    if not legend:
        raise bad(source, no, "a table before its legend ('col-1 : <build>' lines)")
    if list(legend) != expected:
        raise bad(source, no, f"the legend names {list(legend)}; expected {expected}")


def _row(
    tokens: list[str], legend: dict[str, str], group: str | None, source: str, no: int
) -> _Row:
    n = len(legend)
    if len(tokens) <= n:
        raise bad(source, no, f"expected {n} value(s) and then the step's name: {tokens}")
    step = safe_name(" ".join(tokens[n:]), source, no, "step name")
    values = {
        col: number(text, source, no, f"{col} of {step}")
        for col, text in zip(legend, tokens[:n], strict=True)
        if text != MISSING
    }
    return _Row(step, group, values, no)


def _step_names(rows: list[_Row], source: str) -> list[str]:
    """The step name of each row: as printed, or step@group where two groups hold it."""
    groups: dict[str, set[str | None]] = {}
    for row in rows:
        groups.setdefault(row.step, set()).add(row.group)
    lines_of: dict[str, int] = {}  # step name -> the line of its row
    for row in rows:
        name = row.step
        if len(groups[row.step]) > 1 and row.group is not None:
            name = f"{row.step}{GROUP_JOIN}{safe_name(row.group, source, row.line, 'group')}"
        if name in lines_of:
            raise bad(
                source,
                row.line,
                f"two rows are named step {name!r} (the other on line {lines_of[name]}); "
                "rename a step or a group",
            )
        lines_of[name] = row.line
    return list(lines_of)


def _repeats(
    legend: dict[str, str],
    base: str | None,
    rows: list[_Row],
    names: list[str],
    source: str,
) -> list[Repeat]:
    unit = "relative" if base is not None else "ops"
    columns: list[tuple[str, str | None]] = [(desc, col) for col, desc in legend.items()]
    if base is not None:
        columns.insert(0, (base, None))  # the base: 1 for every step
    labels = [safe_name(desc, source, None, "column") for desc, _ in columns]
    if len(set(labels)) < len(labels):
        raise bad(source, None, f"two columns have the same name: {labels}")

    def measured(row: _Row, name: str, col: str | None) -> Measured | None:
        qps = 1.0 if col is None else row.values.get(col)
        if qps is None:
            return None
        detail = {"tool": "table"} if row.group is None else {"tool": "table", "group": row.group}
        return Measured(step=name, qps=qps, op="op", unit=unit, detail=detail)

    return [
        Repeat(
            label=label,
            steps=tuple(
                m
                for row, name in zip(rows, names, strict=True)
                if (m := measured(row, name, col)) is not None
            ),
            source=source,
            build=desc,
        )
        for label, (desc, col) in zip(labels, columns, strict=True)
    ]
