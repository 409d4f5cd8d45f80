"""dbregress import KIND FILE... --as RUN: existing results of another tool as a run
folder that `dbregress report` and `dbregress compare` read (docs/imports.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dbregress.imports import db_bench, iibench, sysbench, tsv
from dbregress.imports.common import Repeat, bad, safe_name, write_run
from dbregress.model.errors import DbregressError
from dbregress.store.history import index_into

# kind -> reader of one file: (text, file name, label, step) -> repeats
Reader = Callable[[str, str, str | None, str | None], list[Repeat]]


def _sysbench(text: str, source: str, label: str | None, step: str | None) -> list[Repeat]:
    assert label is not None
    return [Repeat(label, (sysbench.parse(text, source, step),), source)]


def _db_bench(text: str, source: str, label: str | None, step: str | None) -> list[Repeat]:
    assert label is not None
    steps = tuple(db_bench.parse(text, source))
    if not steps:
        raise bad(source, None, "no benchmark line ('NAME : X micros/op N ops/sec ...')")
    return [Repeat(label, steps, source, version=db_bench.version(text))]


KINDS: dict[str, Reader] = {
    "sysbench": _sysbench,
    "db_bench": _db_bench,
    "iibench": lambda text, source, label, step: iibench.parse(text, source),
    "tsv": lambda text, source, label, step: tsv.parse(text, source),
}
TABLES = ("iibench", "tsv")  # a file holds every column; labels come from the file
BENCHMARK = {"iibench": "insert"}  # the report titles an Insert Benchmark as such


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "import",
        help="turn results of sysbench, db_bench, the Insert Benchmark or a table into a run",
        description="Turn existing result files into a run folder that `dbregress report` "
        "and `dbregress compare` read. sysbench and db_bench: each FILE is one repeat of "
        "one column. iibench and tsv: each FILE is a whole table, one repeat of each of its "
        "columns. See docs/imports.md.",
    )
    p.add_argument("kind", metavar="KIND", help=f"one of {', '.join(KINDS)}")
    p.add_argument("files", metavar="FILE", type=Path, nargs="+")
    p.add_argument("--as", dest="name", required=True, metavar="RUN", help="the run's name")
    p.add_argument(
        "--results",
        type=Path,
        default=Path("results"),
        help="folder that receives the run folder (default: results)",
    )
    p.add_argument(
        "--label",
        action="append",
        metavar="L",
        help="the column of each FILE, in order (or one for all); files with the same label "
        "are its repeats r1, r2, ... (default: the file's name without its extension)",
    )
    p.add_argument("--step", help="sysbench: the step's name (default: the test, if known)")
    p.set_defaults(func=run)


def _labels(args: argparse.Namespace) -> list[str | None]:
    files: list[Path] = args.files
    given: list[str] | None = args.label
    if args.kind in TABLES:
        if given:
            raise DbregressError(f"--label: a {args.kind} table names its own columns")
        return [None] * len(files)
    if not given:
        return [f.stem for f in files]
    if len(given) == 1:
        return [given[0]] * len(files)
    if len(given) != len(files):
        raise DbregressError(
            f"--label given {len(given)} times for {len(files)} files: give one per file, "
            "in the files' order, or one for all"
        )
    return [*given]


def _text(path: Path) -> str:
    try:
        return path.read_bytes().decode()
    except OSError as e:
        raise DbregressError(f"cannot read {path}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise bad(path.name, None, f"not a text file ({e.reason} at byte {e.start})") from e


def run(args: argparse.Namespace) -> int:
    reader = KINDS.get(args.kind)
    if reader is None:
        raise DbregressError(f"unknown KIND {args.kind!r}; one of: {', '.join(KINDS)}")
    if args.step is not None and args.kind != "sysbench":
        raise DbregressError(f"--step is for sysbench; {args.kind} files name their steps")
    if safe_name(args.name, "--as", None, "run name") != args.name:
        raise DbregressError(
            f"--as {args.name!r}: use letters, digits and . _ - + = , : @ (a folder name)"
        )
    repeats: list[Repeat] = []
    for path, label in zip(args.files, _labels(args), strict=True):
        safe = safe_name(label, path.name, None, "label") if label is not None else None
        repeats += reader(_text(path), path.name, safe, args.step)
    files = [p.name for p in args.files]
    kind = args.kind
    path = write_run(args.results, args.name, kind, BENCHMARK.get(kind, kind), files, repeats)
    index_into(
        args.results,
        lambda h: h.index_run(path),
        lambda line: print(f"warning: {line}", file=sys.stderr),
    )
    labels = list(dict.fromkeys(r.label for r in repeats))
    steps = list(dict.fromkeys(m.step for r in repeats for m in r.steps))
    print(f"Imported {len(files)} file(s) into {path}")
    print(f"  columns: {', '.join(labels)} (base: {labels[0]})")
    print(f"  steps: {', '.join(steps)}")
    print(f"Report: dbregress report {args.name} --results {args.results}")
    return 0
