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
"""

from __future__ import annotations

import re

from dbregress.imports.common import Measured, Repeat, bad, lines, number, safe_name

LEGEND = re.compile(r"(col-\d+)\s*:\s*(\S.*)")
RELATIVE = re.compile(r"Relative to:\s*(\S.*)")
MISSING = "-"


def parse(text: str, source: str) -> list[Repeat]:
    legend: dict[str, str] = {}  # col-N -> description
    base: str | None = None
    values: dict[str, dict[str, float]] = {}  # col-N -> step -> value
    steps: list[str] = []
    for no, raw in lines(text):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        tokens = line.split()
        if relative := RELATIVE.fullmatch(line):
            if base is not None or steps:
                raise bad(source, no, "a second table; import one table per file")
            base = relative.group(1).strip()
        elif entry := LEGEND.fullmatch(line):
            if steps:
                raise bad(source, no, "a legend line after the rows; import one table per file")
            legend[entry.group(1)] = entry.group(2).strip()
        elif all(t.startswith("col-") for t in tokens):
            _check_legend(legend, source, no)
            if tokens != list(legend):
                raise bad(source, no, f"the header names {tokens}, the legend {list(legend)}")
        else:
            _check_legend(legend, source, no)
            step = _row(tokens, legend, values, source, no)
            if step in steps:
                raise bad(source, no, f"step {step!r} has a row already")
            steps.append(step)
    if not steps:
        raise bad(source, None, "no row of values (a value per column, then the step's name)")
    return _repeats(legend, base, values, steps, source)


def _check_legend(legend: dict[str, str], source: str, no: int) -> None:
    expected = [f"col-{i}" for i in range(1, len(legend) + 1)]
    if not legend:
        raise bad(source, no, "a table before its legend ('col-1 : <build>' lines)")
    if list(legend) != expected:
        raise bad(source, no, f"the legend names {list(legend)}; expected {expected}")


def _row(
    tokens: list[str],
    legend: dict[str, str],
    values: dict[str, dict[str, float]],
    source: str,
    no: int,
) -> str:
    n = len(legend)
    if len(tokens) <= n:
        raise bad(source, no, f"expected {n} value(s) and then the step's name: {tokens}")
    step = safe_name(" ".join(tokens[n:]), source, no, "step name")
    for col, text in zip(legend, tokens[:n], strict=True):
        if text != MISSING:
            values.setdefault(col, {})[step] = number(text, source, no, f"{col} of {step}")
    return step


def _repeats(
    legend: dict[str, str],
    base: str | None,
    values: dict[str, dict[str, float]],
    steps: list[str],
    source: str,
) -> list[Repeat]:
    unit = "relative" if base is not None else "ops"
    columns = [(desc, values.get(col, {})) for col, desc in legend.items()]
    if base is not None:
        columns.insert(0, (base, dict.fromkeys(steps, 1.0)))
    labels = [safe_name(desc, source, None, "column") for desc, _ in columns]
    if len(set(labels)) < len(labels):
        raise bad(source, None, f"two columns have the same name: {labels}")
    return [
        Repeat(
            label=label,
            steps=tuple(
                Measured(step=s, qps=v[s], op="op", unit=unit, detail={"tool": "table"})
                for s in steps
                if s in v
            ),
            source=source,
            build=desc,
        )
        for label, (desc, v) in zip(labels, columns, strict=True)
    ]
