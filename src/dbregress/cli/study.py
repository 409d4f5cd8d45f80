"""dbregress study: labs that reproduce a published report (a seed), and their pages
(docs/studies.md). `list` the studies, `run` one (its lab rendered with the params and
scale given, run as `dbregress run` runs a lab, then its page written), or write a
study's `page` from a run made earlier or elsewhere (or, without a run, what it would
run)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from dbregress.cli import run as cli_run
from dbregress.cli.exits import EXIT_OK, EXIT_UNJUDGED, epilog
from dbregress.cli.fleet import add_tls
from dbregress.cli.report import add_fail_on, write_report
from dbregress.model import interrupts
from dbregress.model.errors import DbregressError, StoreError
from dbregress.shapes.study import StudyRunJson
from dbregress.store.run import resolve_run
from dbregress.study import page, record
from dbregress.study.file import STUDIES, Study, find_study, load_study, study_files
from dbregress.study.render import param_values


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "study",
        help="run a study (a lab reproducing a published report) and write its page",
        description="Studies reproduce a published report (a seed): each is a study file "
        "labs/studies/NAME.toml naming its lab, the params a user supplies and the seed's "
        "figures as claims. `run` runs its lab and writes its page (our tables beside the "
        "seed's figures, with their agreement); `page` writes the page of a run made "
        "earlier or elsewhere, or what the study would run (docs/studies.md).",
    )
    verbs = p.add_subparsers(dest="study_verb", required=True, metavar="SUBCOMMAND")
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--studies", type=Path, default=STUDIES, help=f"the studies' folder (default {STUDIES})"
    )
    ls = verbs.add_parser("list", parents=[where], help="the studies: name, seed, title, params")
    ls.set_defaults(func=list_studies)
    r = verbs.add_parser(
        "run", parents=[where], help="run a study's lab and write its page", description=_RUN
    )
    r.add_argument("name", help="a study's name (labs/studies/NAME.toml) or its file")
    r.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help=_PARAM)
    r.add_argument("--scale", default="small", help="small (the lab as written) or full")
    r.add_argument(
        "--out", type=Path, default=Path("results"), help="the results folder (default results)"
    )
    r.add_argument("--page", type=Path, help="where to write the page (default: the study's)")
    r.add_argument("--scheduler", metavar="ADDR", help="run on a fleet (docs/fleet.md)")
    r.add_argument("--recount", action="store_true", help="take no replay from the count store")
    add_tls(r)
    add_fail_on(r)
    r.set_defaults(func=run_study)
    pg = verbs.add_parser(
        "page", parents=[where], help="write a study's page from a run", description=_PAGE
    )
    pg.add_argument("name", help="a study's name (labs/studies/NAME.toml) or its file")
    pg.add_argument("run", nargs="?", help="a run folder, a run id under --results, or latest")
    pg.add_argument("--results", type=Path, default=Path("results"), help="the results folder")
    pg.add_argument("--page", type=Path, help="where to write the page (default: the study's)")
    pg.set_defaults(func=write_page)
    for command in verbs.choices.values():  # the one table of exit statuses, as every verb
        command.epilog = epilog()
        command.formatter_class = argparse.RawDescriptionHelpFormatter


_RUN = (
    "Render the study's lab (its params put into the build strings, the scale's sizes "
    "merged), run it as `dbregress run` runs a lab, then write the page. The run folder "
    "keeps the lab as it ran (lab.toml) and study.json (the command, start, wall time, "
    "host and sizes). A study that cannot run here (runnable = false) exits 2 naming "
    "what it needs."
)
_PAGE = (
    "Write the study's page from a run folder (verdicts.json, written first if the run "
    "has none), so that a run made earlier or on another host gets its page; without a "
    "run, the page says what the study would run."
)
_PARAM = "a param of the study (repeat for each; `dbregress study list` names them)"


def list_studies(args: argparse.Namespace) -> int:
    files = study_files(args.studies)
    if not files:
        print(f"no studies in {args.studies}")
        return EXIT_OK
    rows: list[tuple[str, str, str, list[str]]] = []  # name, seed, runnable, title and more
    bad = 0
    for path in files:
        try:
            s = load_study(path)
        except DbregressError as e:
            bad += 1
            rows.append((path.stem, "?", "invalid", ["", f"error: {e}"]))
            continue
        more = [s.title, f"params: {', '.join(s.params) or '-'}"]
        rows.append((s.name, s.seed, "yes" if s.runnable else "no", more))
        if not s.runnable:
            more.append(f"needs: {_needs(s)}")
    widths = [max(len(r[i]) for r in [("NAME", "SEED", "RUNNABLE", []), *rows]) for i in range(3)]
    print(
        "  ".join(c.ljust(w) for c, w in zip(("NAME", "SEED", "RUNNABLE"), widths, strict=True)),
        " TITLE",
    )
    for name, seed, runnable, (title, *lines) in rows:
        cells = (c.ljust(w) for c, w in zip((name, seed, runnable), widths, strict=True))
        print("  ".join([*cells, title]).rstrip())
        print("".join(f"    {line}\n" for line in lines), end="")
    return EXIT_UNJUDGED if bad else EXIT_OK


def _needs(study: Study) -> str:
    if study.needs:
        return study.needs.rstrip(". ")
    said = "; ".join(f"{p}: {what}" for p, what in study.params.items())
    return said or "what its lab names"


def _given(pairs: list[str]) -> dict[str, str]:
    given: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise DbregressError(f"--param {pair!r}: write NAME=VALUE")
        if name in given:
            raise DbregressError(f"--param {name} is given twice")
        given[name] = value
    return given


def run_study(args: argparse.Namespace) -> int:
    clock = time.monotonic()
    study = load_study(find_study(args.name, args.studies))
    if not study.runnable:
        raise DbregressError(
            f"study {study.name} cannot run here: it needs {_needs(study)}. "
            f"`dbregress study page {study.name}` writes what it would run"
        )
    values = param_values(study.name, study.params, _given(args.param))
    rendered = study.rendered(values, args.scale)
    interrupts.install()
    args.results = args.out
    target = args.page or study.page
    argv = ["dbregress", "study", "run", args.name]
    argv += [f"--param={p}" for p in args.param] + ["--scale", args.scale, "--out", str(args.out)]
    held: list[StudyRunJson] = []

    def started(path: Path) -> None:
        held.append(record.start(path, study, rendered.lab, argv, values, args.scale))

    def reported(path: Path) -> None:
        if held:
            held[0] = record.finish(path, held[0], time.monotonic() - clock)
        try:
            page.write(study, record.read_view(path), target)
        except DbregressError as e:
            print(
                f"warning: no page ({e}); write it with `dbregress study page {study.name} {path}`",
                file=sys.stderr,
            )
            return
        print(f"Page: {target}", file=sys.stderr)

    return cli_run.run_loaded(rendered.lab, args, None, started=started, reported=reported)


def write_page(args: argparse.Namespace) -> int:
    study = load_study(find_study(args.name, args.studies))
    target = args.page or study.page
    if args.run is None:
        page.write(study, None, target)
        print(f"Page: {target} (not run: what the study would run)")
        return EXIT_OK
    path = resolve_run(args.run, args.results)
    if not (path / "verdicts.json").is_file():
        write_report(path)  # the report's verdicts, written as `dbregress report` does
    view = record.read_view(path)
    ran = {c["name"] for c in view.record["comparisons"]}
    if not ran & {c.name for c in study.lab.comparisons}:
        raise StoreError(
            f"run {view.record['run_id']} has none of study {study.name}'s comparisons "
            f"({', '.join(c.name for c in study.lab.comparisons)}; the run's: {', '.join(ran)})"
        )
    page.write(study, view, target)
    print(f"Page: {target}")
    return EXIT_OK
