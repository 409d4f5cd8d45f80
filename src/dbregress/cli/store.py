"""dbregress store: the store of counting replays (store/counted.py, docs/count-store.md):
what it holds, how big it is, and pruning it.

- `list`: a row per key (one build, counting method, comparison's steps and lane
  profile), the builds in order and each build's newest key first, then a total line;
- `size`: every file and its bytes, and how many of them the store ignores;
- `prune`: remove the entries every given criterion selects (`--dry-run`: only say
  which). Removing an entry never changes a run's results: a run keeps the replays it
  took; a later run counts what is no longer stored.

Which store: `--store DIR` names it, `--results DIR` means DIR/count-store, and without
either the one runs use (DBREGRESS_COUNT_STORE, else results/count-store).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

from dbregress.model.errors import DbregressError
from dbregress.report.verdict_tables import table
from dbregress.store import counted
from dbregress.store.counted import CountStore, Found, Prune

DAY_S = 86_400.0
SHORT = 12  # characters of a key shown (CountKey.count; the entry's folder)
RUNS_SHOWN = 4  # runs named per key; the rest are counted
PRUNE_OPTIONS = "--older-than DAYS, --build SPEC, --identity KEY, --unusable"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "store",
        help="list, size and prune the store of counting replays",
        description="The store of counting replays: every finished counting replay, kept "
        "by its build, counting method, steps and lane profile so that later runs take it "
        "instead of counting again (docs/count-store.md). Which store: --store DIR, else "
        "--results DIR's count-store, else DBREGRESS_COUNT_STORE's, else "
        "results/count-store.",
    )
    _where(p, None)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    # the options are taken after the action too (`store list --store DIR`); SUPPRESS
    # keeps an absent one from overwriting one given before it
    here = argparse.ArgumentParser(add_help=False)
    _where(here, argparse.SUPPRESS)
    actions.add_parser(
        "list", parents=[here], help="a row per key: build, counting method, steps, replays"
    )
    actions.add_parser(
        "size", parents=[here], help="the store's files and bytes, and how many are unusable"
    )
    prune = actions.add_parser(
        "prune",
        parents=[here],
        help="remove the entries every given criterion selects",
        description="Remove the entries that every criterion given selects (at least one "
        f"of {PRUNE_OPTIONS}). A run that took a replay keeps it; a later run counts what "
        "is no longer stored.",
    )
    prune.add_argument(
        "--older-than",
        type=float,
        metavar="DAYS",
        help="entries stored more than DAYS ago (an unreadable one: its file's age)",
    )
    prune.add_argument(
        "--build",
        metavar="SPEC",
        help="entries of this build as the lab names it (rocksdb@7.10.2), or whose build "
        "key starts with SPEC",
    )
    prune.add_argument(
        "--identity",
        metavar="KEY",
        help="entries whose counting method's key starts with KEY (`store list`'s count key)",
    )
    prune.add_argument(
        "--unusable",
        action="store_true",
        help="entries the store ignores: unreadable, partial, of another schema",
    )
    prune.add_argument("--dry-run", action="store_true", help="list what would go; remove nothing")
    p.set_defaults(func=run)


def _where(p: argparse.ArgumentParser, default: Any) -> None:
    p.add_argument(
        "--results",
        type=Path,
        default=default,
        metavar="DIR",
        help="the results folder whose count-store to use (default: results)",
    )
    p.add_argument(
        "--store",
        type=Path,
        default=default,
        metavar="DIR",
        help="the store folder itself (as DBREGRESS_COUNT_STORE names it)",
    )


def root(store: Path | None, results: Path | None) -> Path:
    """The store the command looks at (the module's text)."""
    if store is not None and results is not None:
        raise DbregressError(
            "give --store DIR (the store folder) or --results DIR (its results folder), not both"
        )
    if store is not None:
        return store
    configured = counted.configured_root()
    if results is not None:
        where = counted.results_root(results)
        if configured is not None and configured.resolve() != where.resolve():
            print(
                f"note: {counted.ENV} names {configured}, the store runs use; this is "
                f"{where} (--results)",
                file=sys.stderr,
            )
        return where
    return configured or counted.results_root(Path("results"))


def size_text(n: float) -> str:
    """Bytes as people read them: 512 B, 3.4 KiB, 1.2 MiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # not reached: GiB ends the loop


def age_text(seconds: float) -> str:
    """An age in the largest whole unit: 40s, 12m, 5h, 3d."""
    seconds = max(0.0, seconds)
    for unit, length in (("d", DAY_S), ("h", 3600.0), ("m", 60.0)):
        if seconds >= length:
            return f"{seconds // length:.0f}{unit}"
    return f"{seconds:.0f}s"


def entries(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def _short(key: str | None) -> str:
    return key[:SHORT] if key else "-"


def _runs(found: list[Found]) -> str:
    names = sorted({str(f.stored.origin.get("run")) for f in found if f.stored is not None})
    text = ", ".join(names[:RUNS_SHOWN])
    return text + (f" (+{len(names) - RUNS_SHOWN} more)" if len(names) > RUNS_SHOWN else "")


def _steps(found: list[Found]) -> str:
    steps: dict[str, None] = {}
    for f in found:
        if f.stored is not None:
            steps |= dict.fromkeys(f.stored.record["steps"])
    return ", ".join(steps) or "-"


def rows(found: list[Found], now: float) -> list[list[str]]:
    """A row per key of the usable entries: the builds in order, each build's key
    with the newest replay first."""
    keys: dict[str, list[Found]] = {}
    for f in found:
        if f.stored is not None:
            keys.setdefault(f.path.parent.name, []).append(f)
    newest = {name: max(g, key=lambda f: f.stored_at) for name, g in keys.items()}
    ordered = sorted(
        keys, key=lambda name: (newest[name].build or "", -newest[name].stored_at, name)
    )
    return [
        [
            newest[name].build or "-",
            _short(newest[name].count_key),
            _steps(keys[name]),
            str(len(keys[name])),
            _runs(keys[name]),
            age_text(now - newest[name].stored_at),
            str(sum(f.size for f in keys[name])),
        ]
        for name in ordered
    ]


def _unusable_line(found: list[Found]) -> list[str]:
    bad = [f for f in found if f.why is not None]
    if not bad:
        return []
    them = "it" if len(bad) == 1 else "them"
    return [
        f"{entries(len(bad))} unusable ({size_text(sum(f.size for f in bad))}), ignored; "
        f"`dbregress store prune --unusable` removes {them}."
    ]


def show_list(store: CountStore, now: float) -> list[str]:
    if not store.root.is_dir():
        return [f"No count store at {store.root}: no counting replay was stored there yet."]
    found = store.survey()
    usable = [f for f in found if f.why is None]
    if not usable:
        return [f"The count store at {store.root} holds no usable replay.", *_unusable_line(found)]
    header = ["build", "count key", "steps counted", "replays", "runs", "newest", "bytes"]
    body = rows(usable, now)
    total = sum(f.size for f in usable)
    return [
        *table(header, body),
        f"{len(usable)} replays, {len(body)} keys, {size_text(total)} in {store.root}",
        *_unusable_line(found),
    ]


def show_size(store: CountStore) -> list[str]:
    files, total = store.size()
    if not files:
        return [f"The count store at {store.root} is empty (no entry, 0 B)."]
    bad = [f for f in store.survey() if f.why is not None]
    lines = [f"{entries(files)}, {total} bytes ({size_text(total)}) in {store.root}"]
    if not bad:
        return [*lines, "No entry is unusable."]
    them = "it" if len(bad) == 1 else "them"
    lines.append(
        f"{entries(len(bad))} unusable ({size_text(sum(f.size for f in bad))}), ignored by "
        f"every run; `dbregress store prune --unusable` removes {them}:"
    )
    return lines + [f"  {f.path.parent.name[:SHORT]}/{f.path.name}: {f.why}" for f in bad]


def criteria(args: argparse.Namespace) -> Prune:
    """The prune's criteria, checked: at least one, each of them sensible."""
    if args.older_than is not None and not 0 <= args.older_than < math.inf:
        raise DbregressError(f"--older-than takes a number of days >= 0, not {args.older_than}")
    for option, value in (("--build", args.build), ("--identity", args.identity)):
        if value is not None and not value.strip():
            raise DbregressError(f"{option} needs a value: an empty one would select everything")
    selected = Prune(
        older_than_s=args.older_than * DAY_S if args.older_than is not None else None,
        build=args.build,
        identity=args.identity,
        unusable=args.unusable,
    )
    if not selected.given():
        raise DbregressError(
            f"store prune needs at least one of {PRUNE_OPTIONS} (criteria combine: an "
            "entry goes when all of them select it; --dry-run lists what would go)"
        )
    return selected


def _entry(f: Found, now: float) -> str:
    what = f.build or "unknown build"
    state = f"unusable: {f.why}" if f.why is not None else f"count key {_short(f.count_key)}"
    name = f"{f.path.parent.name[:SHORT]}/{f.path.name}"
    return f"  {name}  {what}, {state}, {age_text(now - f.stored_at)} old, {f.size} bytes"


def prune(store: CountStore, selected: Prune, dry_run: bool, now: float) -> list[str]:
    if not store.root.is_dir():
        return [f"No count store at {store.root}: nothing to remove."]
    found = store.survey()
    going = [f for f in found if selected.matches(f, now)]
    size = sum(f.size for f in going)
    if dry_run:
        head = f"Would remove {len(going)} of {entries(len(found))} ({size_text(size)})"
        return [f"{head} from {store.root}:" if going else f"{head} from {store.root}."] + [
            _entry(f, now) for f in going
        ]
    for f in going:
        store.discard(f.path)
    return [
        f"Removed {entries(len(going))}, {size} bytes ({size_text(size)}), from {store.root}; "
        f"{len(found) - len(going)} left."
    ]


def run(args: argparse.Namespace) -> int:
    store = CountStore(root(args.store, args.results))
    now = time.time()
    if args.action == "list":
        lines = show_list(store, now)
    elif args.action == "size":
        lines = show_size(store)
    else:
        lines = prune(store, criteria(args), args.dry_run, now)
    print("\n".join(lines))
    return 0
