"""The builds a bisection orders: the registry's versions between two, a source tree's
commits between two (in a shipped flavor or the user's own), the release tags that join
the two; and how a build is named in its progress lines, table and answer."""

from __future__ import annotations

import json
import re
import tomllib
from functools import cache
from pathlib import Path

from dbregress import provision
from dbregress.bisect.model import BisectError, BisectRequest, Outcome
from dbregress.lab.flavors import read_flavors
from dbregress.model.errors import BuildNotFound, LabError
from dbregress.model.tomlreader import TableReader, read_toml
from dbregress.provision import source
from dbregress.provision.versioning import version_key
from dbregress.shapes.flavor_table import FlavorTables


def between(engine: str, good: str, bad: str, available: list[str]) -> list[str]:
    """The registry's versions from good to bad, both included, in the registry's order."""
    for v in (good, bad):
        if v not in available:
            raise BisectError(
                f"{engine}@{v} is not in the registry's list; `dbregress versions {engine}` "
                "prints the versions that can be fetched"
            )
    i, j = available.index(good), available.index(bad)
    if i == j:
        raise BisectError(f"{engine}@{good}: give two different versions")
    if i > j:
        raise BisectError(
            f"{engine}@{good} comes after {engine}@{bad} in the registry: give the good "
            "(older) version first, or use --builds for another order"
        )
    return available[i : j + 1]


def registry_builds(good: str, bad: str) -> tuple[str, ...]:
    """ENGINE@GOOD ENGINE@BAD -> every registry build spec between them, in order."""
    g, b = provision.BuildSpec.parse(good), provision.BuildSpec.parse(bad)
    if g.engine != b.engine:
        raise BisectError(f"{good} and {bad} are builds of different engines")
    versions = between(g.engine, g.version, b.version, provision.versions(g.engine))
    return tuple(f"{g.engine}@{v}" for v in versions)


def check_flavor(engine: str, flavor: str, flavors: FlavorTables) -> None:
    """A shipped flavor or one of --flavors: said now, not at the first build."""
    family = source.FAMILY.get(engine, engine)
    if flavor in flavors.get(family, {}):
        return
    try:
        source.recipe(engine, flavor)
    except BuildNotFound as e:
        if not flavors:
            raise
        mine = ", ".join(sorted(flavors.get(family, {}))) or "none for this engine"
        raise BuildNotFound(f"{e}; in --flavors: {mine}") from None


def source_builds(
    engine: str,
    path: str,
    good: str,
    bad: str,
    flavor: str,
    first_parent: bool = True,
    flavors: FlavorTables | None = None,
    notes: list[str] | None = None,
) -> tuple[str, ...]:
    """--src PATH GOOD BAD: a build spec per commit from good to bad, in order (each
    built from the tree at that commit in `flavor` when the bisection measures it).
    When good is not an ancestor of bad (two release branches), the commits start at
    their merge base, and `notes` gets the sentence that says so."""
    tree = Path(path).expanduser().resolve()
    source.require_tree(engine, tree)
    check_flavor(engine, flavor, flavors or {})
    commits, note = source.commits_between(tree, good, bad, first_parent)
    if note and notes is not None:
        notes.append(note)
    return tuple(f"{engine}@src:{tree}#{c.id}+{flavor}" for c in commits)


# Keys that make a TOML file a lab file rather than a file of flavors only.
LAB_KEYS = ("column", "comparison")


def read_flavor_file(path: Path) -> FlavorTables:
    """--flavors FILE: [flavors.FAMILY.NAME] tables as a lab file writes them (checked
    as a lab's are), with each patch's path made absolute (relative to FILE). FILE is a
    file of such tables only (any other key is a mistake it names) or a lab file, whose
    flavors are read and the rest left to `dbregress run`."""
    text, data = read_toml(path, "flavors file")
    top = TableReader(path, text, "", data)
    read_flavors(top)  # every error names the file, the line and the key
    top.get("flavors", dict, {})
    if not any(k in data for k in LAB_KEYS):
        top.reject_unknown()
    tables: FlavorTables = json.loads(json.dumps(data.get("flavors", {})))
    for names in tables.values():
        for table in names.values():
            for patch in table.get("patches", []):
                patch["file"] = str((path.parent / patch["file"]).resolve())
    return tables


def flavors_toml(flavors: FlavorTables) -> str:
    """The flavor tables as a lab file's [flavors.FAMILY.NAME] tables (a point's lab)."""
    lines: list[str] = []
    for family, names in flavors.items():
        for name, table in names.items():
            lines += ["", f"[flavors.{family}.{name}]"]
            for key, value in table.items():
                if key != "patches":
                    lines.append(f"{key} = {json.dumps(value)}")
            patches = table.get("patches", [])
            if patches:
                items = ", ".join(
                    "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in p.items()) + " }"
                    for p in patches
                )
                lines.append(f"patches = [{items}]")
    return "\n".join(lines)


def spec_of(build: str, flavors: FlavorTables) -> provision.BuildSpec:
    """A build of the list as provision fetches it: a source build in one of the
    user's flavors carries that flavor's recipe (its patches read now)."""
    spec = provision.BuildSpec.parse(build)
    family = source.FAMILY.get(spec.engine)
    if not spec.is_source or family is None or family not in flavors:
        return spec
    flavor = source.SourceSpec.parse(spec).flavor
    if flavor not in flavors[family]:
        return spec
    text = flavors_toml(flavors)
    top = TableReader(Path("--flavors"), text, "", tomllib.loads(text))
    try:
        recipes = read_flavors(top)
    except LabError as e:  # a patch removed since the bisection began
        raise BisectError(f"--flavors: {e}") from None
    return provision.BuildSpec(spec.engine, spec.version, recipes[family][flavor])


# The tags a project gives its releases, per engine: PostgreSQL's REL_17_2 (REL9_6_10
# before 10), MariaDB's mariadb-10.11.5, MySQL's mysql-8.0.28, Percona Server's
# Percona-Server-8.0.28-19 (the version and a build number), FB MySQL's fb-mysql-8.0.28
# (a branch of facebook/mysql-5.6 rather than a tag), RocksDB's v9.10.0.
def release_tags(engine: str, version: str) -> list[str]:
    """The tags release `version` may have in the engine's repository, likeliest first
    (a tag may also carry a build number after them: see release_commit)."""
    parts = list(version_key(version.split("-")[0]))
    if not parts:
        return []
    dotted = ".".join(map(str, parts))
    if engine == "postgres":
        if parts[0] >= 10:
            # Maven's 17.2.0 is PostgreSQL 17.2
            major, minor = parts[0], parts[1] if len(parts) > 1 else 0
            return [f"REL_{major}_{minor}"]
        return ["REL" + "_".join(map(str, parts[:3]))]
    if engine == "mariadb":
        return [f"mariadb-{dotted}"]
    if engine == "mysql":
        # Oracle's tag first: Percona's and FB's trees merge Oracle's history, tags
        # included, and a registry build is Oracle's release
        return [f"mysql-{dotted}", f"Percona-Server-{dotted}", f"fb-mysql-{dotted}"]
    if engine == "rocksdb":
        return [f"v{dotted}", f"rocksdb-{dotted}"]
    return []


# What may follow a release's tag name in a tag of that release: a build number
# (Percona-Server-8.0.28-19; 5.6's read like Percona-Server-5.6.51-91.0).
_BUILD_SUFFIX = re.compile(r"-(\d+(?:\.\d+)*)")


def _with_build(tree: Path, tag: str) -> tuple[str | None, list[str]]:
    """The tag `tag`-BUILD with the highest build number in the tree (None when there
    is none), and the tags that begin with `tag` but go on otherwise (said when none
    is found: a tag form this does not know)."""
    builds: list[tuple[tuple[int, ...], str]] = []
    other: list[str] = []
    for name in source.list_tags(tree, f"{tag}*"):
        rest = name.removeprefix(tag)
        if not rest:
            continue
        suffix = _BUILD_SUFFIX.fullmatch(rest)
        if suffix:
            builds.append((version_key(suffix.group(1)), name))
        else:
            other.append(name)
    return (max(builds)[1] if builds else None), other


def release_commit(engine: str, tree: Path, spec: str) -> str:
    """The tag of a registry build's release in the git checkout at `tree`: one of
    release_tags, or one of those with a build number after it (the highest build);
    BisectError naming the tags tried when the tree has none of them."""
    version = provision.BuildSpec.parse(spec).version
    tried = release_tags(engine, version)
    seen: list[str] = []
    for tag in tried:
        try:
            source.resolve_commit(tree, tag)
        except BuildNotFound:
            pass
        else:
            return tag
        built, other = _with_build(tree, tag)
        if built is not None:
            return built
        seen += other
    near = f"; tags that begin so but do not end in a build number: {', '.join(seen[:6])}"
    raise BisectError(
        f"{spec}: no release tag for it in {tree} (tried {', '.join(tried) or 'none'}); "
        f"nor one of those with a build number after it (TAG-N){near if seen else ''}; "
        f"bisect the commits yourself: dbregress bisect --src {tree} GOOD BAD"
    )


def commits_after(
    request: BisectRequest, outcome: Outcome, notes: list[str] | None = None
) -> tuple[str, ...] | None:
    """Releases, then commits: the source builds between the two releases the registry
    bisection ended on (the last good one and the first bad one, or the last of the
    candidates when releases that could not be fetched lie between), or None when there
    is no second phase. Releases on two branches start from their merge base (a note
    in `notes` says so)."""
    bad = outcome.first_bad or (outcome.candidates[-1] if outcome.candidates else None)
    if not request.then_src or not bad or not outcome.last_good:
        return None
    engine = provision.BuildSpec.parse(bad).engine
    tree = Path(request.then_src)
    good_tag = release_commit(engine, tree, outcome.last_good)
    bad_tag = release_commit(engine, tree, bad)
    return source_builds(
        engine,
        str(tree),
        good_tag,
        bad_tag,
        request.then_flavor,
        not request.then_all_commits,
        request.flavors,
        notes,
    )


def label_of(index: int, spec: str) -> str:
    """A column label for the index-th build of the list (labels must be unique and
    short: a path becomes its last part, a source tree's commit its first 12 digits)."""
    tail = spec.split("@", 1)[-1].rstrip("/").rsplit("/", 1)[-1]
    if "#" in tail:  # a commit of a source tree: its id and flavor say which
        ref, _, flavor = tail.partition("#")[2].partition("+")
        tail = f"{ref[:12]}-{flavor}" if flavor else ref[:12]
    clean = re.sub(r"[^A-Za-z0-9._-]", "-", tail)[:40].strip("-._") or "build"
    return f"b{index:02d}-{clean}"


def shown(spec: str) -> str:
    """A build as a table shows it: a source build by its commit and flavor (the tree
    is the same for all), any other by its spec."""
    parsed = provision.BuildSpec.parse(spec)
    if not parsed.is_source:
        return spec
    src = source.SourceSpec.parse(parsed)
    return f"{src.ref[:12] if src.ref else 'tree'}+{src.flavor}"


@cache
def _subject(tree: Path, ref: str) -> tuple[str, str]:
    return source.subject_and_date(tree, ref)


def commit_and_subject(spec: str) -> tuple[str, str] | None:
    """A source build's full commit id and subject; None for any other build."""
    parsed = provision.BuildSpec.parse(spec)
    if not parsed.is_source:
        return None
    src = source.SourceSpec.parse(parsed)
    return (src.ref, _subject(src.path, src.ref)[0]) if src.ref else None


def commit_of(spec: str) -> str | None:
    """A source build's commit as `git log` shows it (id, subject, author date); None
    for any other build."""
    parsed = provision.BuildSpec.parse(spec)
    if not parsed.is_source:
        return None
    src = source.SourceSpec.parse(parsed)
    if src.ref is None:
        return None
    subject, date = _subject(src.path, src.ref)
    return f"{src.ref[:12]} {subject} ({date})"


def described(spec: str) -> str:
    """A build as a progress line names it: a commit by its id and subject, any other
    build by its spec."""
    parsed = provision.BuildSpec.parse(spec)
    if not parsed.is_source:
        return spec
    src = source.SourceSpec.parse(parsed)
    if src.ref is None:
        return shown(spec)
    subject = _subject(src.path, src.ref)[0]
    return f"{src.ref[:12]} {subject[:60]!r}"


def merge_note(first_bad: str, last_good: str | None) -> str | None:
    """When a source build's first bad commit is a merge: that it is one, and which of
    its parents brought the change (not the one measured good: the line the merge joins
    to it), with the bisection of that line to run next; None for any other build."""
    parsed = provision.BuildSpec.parse(first_bad)
    if not parsed.is_source:
        return None
    src = source.SourceSpec.parse(parsed)
    parents = source.parents_of(src.path, src.ref) if src.ref else []
    if len(parents) < 2:
        return None
    good = source.SourceSpec.parse(provision.BuildSpec.parse(last_good)).ref if last_good else None
    if good not in parents:
        listed = ", ".join(p[:12] for p in parents)
        return f"{src.ref and src.ref[:12]} is a merge (parents {listed})"
    others = [p for p in parents if p != good]
    brought = "; ".join(f"{p[:12]} {_subject(src.path, p)[0]!r}" for p in others)
    base = source.branch_point(src.path, good, others[0])
    again = (
        f"; bisect that line with the same options: dbregress bisect --src {src.path} "
        f"{base[:12]} {others[0][:12]}"
        if base and base != others[0]
        else ""
    )
    return (
        f"{src.ref and src.ref[:12]} is a merge: its parent {good[:12]} (the last good, "
        f"measured) does not have the change, so it came through its other parent "
        f"({brought}), the line the merge joins, or with the merge's own resolution{again}"
    )
