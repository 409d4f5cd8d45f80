"""The Insert Benchmark's summary table: Q per build (a row) and step (a column).

    dbms        l.i0     l.x      l.i1    l.i2    qr100   qp100 ...
    my5651      312031   1021011  45017   39015   20105   21004 ...
    my8043      190123   2503200  46802   33510   13843   13007 ...

A header line starting with `dbms` names the steps; each row names a build and gives a
value per step (tab- or space-separated, `-` where it has none). Each row becomes a column
of the run, labelled by its name; the first row is the base. Q is inserted rows/s for
l.i0, l.i1 and l.i2, indexed rows/s for l.x and queries/s for the q-steps, as in the
report the table comes from. One table per file.
"""

from __future__ import annotations

from dbregress.imports.common import Measured, Repeat, bad, lines, number, safe_name

HEADER = "dbms"
MISSING = "-"


def q_of(step: str) -> tuple[str, str]:
    """(operation, unit) of an Insert Benchmark step's Q."""
    if step == "l.x":
        return "create_index", "rows"
    if step.startswith("l.i"):
        return "insert", "rows"
    return "query", "ops"


def parse(text: str, source: str) -> list[Repeat]:
    steps: list[str] | None = None
    repeats: list[Repeat] = []
    for no, raw in lines(text):
        tokens = raw.split()
        if not tokens or tokens[0].startswith("#"):
            continue
        if tokens[0].lower() == HEADER:
            if steps is not None:
                raise bad(source, no, "a second table; import one table per file")
            steps = [safe_name(t, source, no, "step name") for t in tokens[1:]]
            if not steps or len(set(steps)) < len(steps):
                raise bad(source, no, f"the header needs distinct step names: {tokens[1:]}")
            continue
        if steps is None:
            raise bad(source, no, f"a row before the header line ('{HEADER} l.i0 l.x ...')")
        if len(tokens) != len(steps) + 1:
            raise bad(
                source, no, f"expected a name and {len(steps)} value(s), found {len(tokens)} fields"
            )
        label = safe_name(tokens[0], source, no, "build name")
        if any(r.label == label for r in repeats):
            raise bad(source, no, f"build {label!r} has a row already")
        measured = tuple(
            Measured(
                step=step,
                qps=number(text, source, no, f"{step} of {label}"),
                op=q_of(step)[0],
                unit=q_of(step)[1],
                detail={"tool": "iibench summary"},
            )
            for step, text in zip(steps, tokens[1:], strict=True)
            if text != MISSING
        )
        repeats.append(Repeat(label=label, steps=measured, source=source, build=tokens[0]))
    if not repeats:
        raise bad(source, None, f"no table: no header line ('{HEADER} l.i0 l.x ...') and rows")
    return repeats
