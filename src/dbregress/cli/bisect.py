"""dbregress bisect GOOD BAD --step S: the first build between two whose step differs."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

from dbregress.bisect import (
    BENCHMARKS,
    DIRECTIONS,
    LANES,
    BisectError,
    Bisection,
    BisectRequest,
    Outcome,
    Size,
    commits_after,
    read_flavor_file,
    registry_builds,
    shown,
    source_builds,
)
from dbregress.bisect.builds import check_flavor
from dbregress.bisect.every import LANE_ONLY, AllChanges, at_least
from dbregress.bisect.model import Notify, load_state
from dbregress.bisect.table import render, render_changes
from dbregress.cli.exits import EXIT_OK
from dbregress.cli.fleet import add_tls
from dbregress.fleet.tls import scheduler_address, tls_dir
from dbregress.model import interrupts
from dbregress.model.errors import Interrupted, LabError
from dbregress.provision import BuildSpec, source
from dbregress.shapes.flavor_table import FlavorTables

DEFAULT_REPLAYS = 3
DEFAULT_BENCHMARK = {"postgres": "insert", "mariadb": "micro", "mysql": "micro", "rocksdb": "kv"}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "bisect",
        help="find the first version between a good and a bad build whose step differs",
        description="Measure the build halfway between a good and a bad one against both, "
        "narrow until two neighbours differ, and print the path taken and the first bad "
        "build. The builds are the registry's versions between GOOD and BAD (as `dbregress "
        "versions` lists them), --builds in your order, or --src commits. Both ends are "
        "built first; a build that cannot be built is skipped, and when skipped builds "
        "leave more than one candidate the answer lists them all. Every run is kept.",
    )
    _add_builds(p)
    _add_measure(p)
    _add_answer(p)
    p.set_defaults(func=run)


def _add_builds(p: argparse.ArgumentParser) -> None:
    """What is bisected: the good and bad builds, the builds between, or a tree's commits."""
    p.add_argument("good", nargs="?", help="ENGINE@VERSION of the good build")
    p.add_argument("bad", nargs="?", help="ENGINE@VERSION of the bad build")
    p.add_argument(
        "--builds",
        help="comma-separated ordered builds instead of the registry's versions, good first "
        "(e.g. mysql@/src/a,mysql@/src/b,mysql@/src/c)",
    )
    p.add_argument(
        "--src",
        metavar="PATH",
        help="bisect the commits of a source tree: GOOD and BAD are commits (ids, tags, "
        "branches) of the git checkout at PATH, and each commit measured is built first "
        "(docs/bisect.md); a commit that does not build is skipped. With GOOD and BAD "
        "registry builds (ENGINE@VERSION): bisect the releases first, then the commits "
        "between the two adjacent releases (by their release tags in PATH)",
    )
    p.add_argument("--engine", default="postgres", help="with --src: the tree's engine")
    p.add_argument(
        "--flavor",
        default="rel",
        help="with --src: every build's flavor (a shipped one, or one of --flavors)",
    )
    p.add_argument(
        "--flavors",
        "--lab",
        dest="flavors",
        metavar="FILE",
        type=Path,
        help="with --src: your own compile flavors, the [flavors.FAMILY.NAME] tables of a "
        "lab file (give the lab file itself, or a file of those tables only; "
        "docs/lab-file.md), e.g. one with patches by version range that make old "
        "commits build; name one with --flavor",
    )
    p.add_argument(
        "--all-commits",
        action="store_true",
        help="with --src: every commit between GOOD and BAD, not only the first-parent line",
    )


def _add_answer(p: argparse.ArgumentParser) -> None:
    """What is looked for: one change in a direction, or every change."""
    p.add_argument(
        "--direction",
        choices=DIRECTIONS,
        help="the change to find: a build slower or faster than the good end (default: "
        "the way the ends differ); a build that moved the other way is never the answer, "
        "in every phase",
    )
    p.add_argument(
        "--all-changes",
        action="store_true",
        help="name every build whose own change of the step's cost is at least --min, both "
        "ways, by splitting the range where its ends differ (cost lane; docs/bisect.md)",
    )
    p.add_argument(
        "--min",
        metavar="PERCENT",
        help="with --all-changes: the smallest change to name (default 0.25%%)",
    )


def _add_measure(p: argparse.ArgumentParser) -> None:
    """How each point is measured and judged, where it is kept, and a resumed bisection."""
    p.add_argument("--step", help="the step to bisect (e.g. revrange, qp100)")
    p.add_argument(
        "--resume",
        metavar="DIR",
        help="continue a stopped bisection (its folder, or 'latest' under --results): the "
        "points it measured are reused, the interrupted run resumed; no other option needed",
    )
    p.add_argument(
        "--try",
        dest="tries",
        action="append",
        default=[],
        metavar="BUILD",
        help="with --resume: measure a build the bisection skipped (its commit id, spec or "
        "label), once you have fixed what kept it from building; repeatable",
    )
    p.add_argument("--benchmark", choices=BENCHMARKS, help="default: the engine's usual one")
    p.add_argument("--config", help="the config profile of every build (default: the engine's)")
    p.add_argument("--lane", choices=LANES, help="the verdicts' lane (default: cost)")
    p.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a benchmark size (e.g. keys=50000; see docs/lab-file.md), repeatable",
    )
    p.add_argument(
        "--replays", type=int, help="counting replays per build at a point (2-20; default 3)"
    )
    p.add_argument(
        "--recount",
        action="store_true",
        help="count every replay anew: take none from the count store (each counted "
        "replay still goes into it)",
    )
    p.add_argument(
        "--results",
        type=Path,
        default=Path("results"),
        help="folder that receives the bisection's folder (default: results)",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDR",
        help="measure the points on a fleet: its Dask scheduler's address (docs/fleet.md)",
    )
    add_tls(p)


# The sizes a lab file gives as lists, given to --size comma-separated.
LIST_SIZES = ("steps", "only")


def _sizes(items: list[str]) -> dict[str, Size]:
    out: dict[str, Size] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise LabError(f"--size {item!r}: write KEY=VALUE, e.g. --size keys=50000")
        value: Size = text.strip()
        if key.strip() in LIST_SIZES:  # steps=l.i0,l.x,qp100: the lab's list
            out[key.strip()] = [name.strip() for name in text.split(",") if name.strip()]
            continue
        for kind in (int, float):
            try:
                value = kind(text.strip())
                break
            except ValueError:
                pass
        out[key.strip()] = value
    return out


class _Then(TypedDict, total=False):
    """Releases, then commits: the second phase's fields of a BisectRequest."""

    then_src: str
    then_flavor: str
    then_all_commits: bool


def _source_range(args: argparse.Namespace, flavors: FlavorTables) -> tuple[str, ...]:
    """--src PATH GOOD BAD: the commits' builds; a range across branches is said."""
    notes: list[str] = []
    builds = source_builds(
        args.engine,
        args.src,
        args.good,
        args.bad,
        args.flavor,
        not args.all_commits,
        flavors,
        notes,
    )
    for note in notes:
        print(f"bisect: {note}", file=sys.stderr)
    return builds


def request_of(args: argparse.Namespace) -> BisectRequest:
    then: _Then = {}
    flavors: FlavorTables = read_flavor_file(args.flavors) if args.flavors else {}
    if flavors and not args.src:
        raise LabError("--flavors FILE is for source builds: give it with --src")
    if args.src and args.good and args.bad and "@" in args.good and "@" in args.bad:
        # releases first, then the commits between the adjacent two
        builds = registry_builds(args.good, args.bad)
        tree = Path(args.src).expanduser().resolve()
        engine = BuildSpec.parse(args.good).engine
        source.require_tree(engine, tree)
        check_flavor(engine, args.flavor, flavors)  # an unknown flavor: now, not after phase one
        then = {
            "then_src": str(tree),
            "then_flavor": args.flavor,
            "then_all_commits": args.all_commits,
        }
    elif args.src:
        if args.builds or not (args.good and args.bad):
            raise LabError("--src PATH takes two commits: dbregress bisect --src PATH GOOD BAD")
        builds = _source_range(args, flavors)
    elif args.builds:
        if args.good or args.bad:
            raise LabError("give GOOD BAD or --builds, not both")
        builds = tuple(b.strip() for b in args.builds.split(",") if b.strip())
    elif args.good and args.bad:
        builds = registry_builds(args.good, args.bad)
    else:
        raise LabError("give a good and a bad build (ENGINE@VERSION ENGINE@VERSION) or --builds")
    if len(builds) < 2:
        raise LabError("--builds needs at least two builds, good first")
    engines = {BuildSpec.parse(b).engine for b in builds}
    if len(engines) != 1:
        raise LabError(f"the builds are of several engines ({', '.join(sorted(engines))})")
    engine = engines.pop()
    benchmark = args.benchmark or DEFAULT_BENCHMARK.get(engine, "insert")
    if args.all_changes:
        _check_all_changes(args, then)
    elif args.min:
        raise LabError("--min is the smallest change --all-changes names: give --all-changes too")
    replays = DEFAULT_REPLAYS if args.replays is None else args.replays
    if not 2 <= replays <= 20:
        raise LabError(f"--replays {replays}: give 2 to 20")
    return BisectRequest(
        builds=builds,
        benchmark=benchmark,
        step=args.step,
        config=args.config,
        lane=args.lane or "cost",
        sizes=_sizes(args.size),
        replays=replays,
        flavors=flavors,
        recount=args.recount,
        direction=args.direction,
        all_changes=args.all_changes,
        minimum=at_least(args.min) if args.min else BisectRequest.minimum,
        **then,
    )


def _check_all_changes(args: argparse.Namespace, then: _Then) -> None:
    """--all-changes: the cost lane, one list of builds, both directions."""
    if (args.lane or "cost") != "cost":
        raise LabError(LANE_ONLY)
    if then:
        raise LabError(
            "--all-changes splits one list of builds: give registry versions (GOOD BAD or "
            "--builds) or --src PATH with two commits, not releases then commits"
        )
    if args.direction:
        raise LabError("--all-changes finds changes both ways: drop --direction")


def check_same_measure(args: argparse.Namespace, saved: BisectRequest, root: Path) -> None:
    """--resume with an option that measures otherwise than the saved bisection (its
    points would not be comparable): refused in one line, as `run --resume` refuses
    another method. An option not given keeps the saved value."""
    asked = {
        "--lane": (args.lane, saved.lane),
        "--replays": (args.replays, saved.replays),
        "--size": (_sizes(args.size) if args.size else None, saved.sizes),
        "--recount": (True if args.recount else None, saved.recount),
        "--direction": (args.direction, saved.direction),
        "--all-changes": (True if args.all_changes else None, saved.all_changes),
        "--min": (at_least(args.min) if args.min else None, saved.minimum),
    }
    differ = [
        f"{option} {_said(mine)} (it has {_said(theirs)})"
        for option, (mine, theirs) in asked.items()
        if mine is not None and mine != theirs
    ]
    if differ:
        raise LabError(
            f"--resume {root}: that bisection measures otherwise: {'; '.join(differ)}; "
            "drop the option to continue it, or start a new bisection"
        )


def _said(value: object) -> str:
    if isinstance(value, float):  # --min
        return f"{value * 100:g}%"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "none"
    if value is None:
        return "none"
    return str(value).lower() if isinstance(value, bool) else str(value)


def resume_root(arg: str, results: Path) -> Path:
    """--resume: a bisection folder, or 'latest' (the newest under --results)."""
    if arg == "latest":
        found = sorted(results.glob("bisect-*/bisect.json"))
        if not found:
            raise LabError(f"--resume latest: no bisection under {results}")
        return found[-1].parent
    path = Path(arg)
    if not (path / "bisect.json").is_file() and (results / arg / "bisect.json").is_file():
        path = results / arg
    if not (path / "bisect.json").is_file():
        raise LabError(f"--resume {arg}: no bisect.json there; give the folder bisect printed")
    return path


def run(args: argparse.Namespace) -> int:
    def notify(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if args.scheduler:  # a wrong address or missing certificates: now, not at a point
        scheduler_address(args.scheduler, tls_dir(args.tls))

    if args.resume:
        given = [
            o
            for o in ("good", "bad", "builds", "step", "benchmark", "config", "flavors")
            if getattr(args, o)
        ]
        if given:
            raise LabError(f"--resume takes the bisection's own request; drop {', '.join(given)}")
        root = resume_root(args.resume, args.results)
        interrupts.install()
        kind = AllChanges if load_state(root).request.all_changes else Bisection
        bisection = kind.resume(root, notify, args.scheduler, args.tls)
        check_same_measure(args, bisection.request, root)
        if not (root / "commits" / "bisect.json").is_file():  # else the commits' phase's
            _add_tries(bisection, args.tries)
        request = bisection.request
    else:
        if args.tries:
            raise LabError("--try retries a build a bisection skipped: give it with --resume DIR")
        if not args.step:
            raise LabError("give --step, the step to bisect (e.g. --step revrange)")
        request = request_of(args)
        interrupts.install()
        root = args.results / f"bisect-{time.strftime('%Y%m%d-%H%M%S')}-{request.step}"
        kind = AllChanges if request.all_changes else Bisection
        bisection = kind(request, root, notify, args.scheduler, args.tls)
    print(
        f"{'resuming ' if args.resume else ''}bisect {request.builds[0]} .. "
        f"{request.builds[-1]}: {len(request.builds)} build(s), step {request.step} "
        f"({request.benchmark}), {request.lane} lane; runs in {root}",
        file=sys.stderr,
    )
    outcome = _phase(bisection, root, "bisection")
    notes: list[str] = []
    commits = commits_after(request, outcome, notes)
    for note in notes:
        print(f"bisect: {note}", file=sys.stderr)
    if commits is not None:
        _commits(request, outcome, commits, root / "commits", notify, args)
    return EXIT_OK


def _phase(bisection: Bisection, resume_at: Path, what: str) -> Outcome:
    """Run one bisection to its end and print its path; Ctrl-C says how to resume (the
    whole bisection's folder), an undecided end where its runs are."""
    try:
        outcome = bisection.run()
    except (Interrupted, KeyboardInterrupt):
        raise Interrupted(
            f"bisection interrupted; every finished run is kept: continue it with "
            f"`dbregress bisect --resume {resume_at}`"
        ) from None
    request = bisection.request
    print(render_changes(outcome, request) if request.all_changes else render(outcome))
    if outcome.candidates:
        print(
            f"\nto measure one of them once it builds: dbregress bisect --resume {resume_at} "
            "--try ID"
        )
    if outcome.stopped and not (outcome.ends_same or outcome.ends_other_way):
        raise BisectError(f"the {what} stopped undecided; its runs are in {bisection.root}")
    return outcome


def _commits(
    request: BisectRequest,
    releases: Outcome,
    builds: tuple[str, ...],
    root: Path,
    notify: Notify,
    args: argparse.Namespace,
) -> Outcome:
    """The second phase of releases-then-commits: the commits between the two adjacent
    releases, measured as the releases were (resumed when its folder holds a state)."""
    if (root / "bisect.json").is_file():
        bisection = Bisection.resume(root, notify, args.scheduler, args.tls)
        _add_tries(bisection, args.tries)
    else:
        follow = commits_request(request, releases, builds)
        bisection = Bisection(follow, root, notify, args.scheduler, args.tls)
    print(
        f"\nthen the commits: {builds[0].split('#')[-1][:12]} .. "
        f"{builds[-1].split('#')[-1][:12]} in {request.then_src}: {len(builds)} build(s); "
        f"runs in {root}",
        file=sys.stderr,
    )
    print()
    return _phase(bisection, root.parent, "bisection of the commits")


def commits_request(
    request: BisectRequest, releases: Outcome, builds: tuple[str, ...]
) -> BisectRequest:
    """The request of the commits' phase: the releases' own, over the commits, in the
    releases' direction (the one asked, or the one the releases found): a commit that
    moved the other way is never its answer."""
    direction = request.direction or releases.direction
    return dataclasses.replace(request, builds=builds, then_src=None, direction=direction)


def _add_tries(bisection: Bisection, tries: list[str]) -> None:
    for text in tries:
        build = bisection.add_try(text)
        print(f"bisect: --try {text}: {shown(build)} is measured at the end", file=sys.stderr)
