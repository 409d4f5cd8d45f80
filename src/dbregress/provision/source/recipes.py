"""Compile recipes: the flavors shipped in flavors.toml and a lab's own
([flavors.FAMILY.NAME] tables), their defaults, and the patches they apply by version
range."""

from __future__ import annotations

import operator
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Literal, NotRequired, TypedDict, cast

from dbregress.model.errors import BuildNotFound, ProvisionError
from dbregress.provision import BuildSpec
from dbregress.provision.maven import sha256
from dbregress.provision.source.spec import DEFAULT_FLAVOR, FAMILY


class Patch(TypedDict):
    """A recipe's patch (patch_entry)."""

    file: str
    versions: str
    sha256: str


class RawRecipe(TypedDict, total=False):
    """A flavor's recipe as flavors.toml or a lab's [flavors.<family>.<name>] table
    gives it: any key may be left out, and only its family's keys are read."""

    cc: str
    cxx: str
    build_type: str
    cflags: str
    ldflags: str
    configure: list[str]
    cmake: list[str]
    patches: list[Patch]
    lto: bool
    myrocks: bool


class Recipe(TypedDict):
    """A recipe with its defaults written out (normalized), as the build and its cache
    key read it: flags always, the family's options (configure for PostgreSQL, cmake and
    build_type for the MySQL family), cc, cxx and patches only when given."""

    cflags: str
    ldflags: str
    configure: NotRequired[list[str]]
    cmake: NotRequired[list[str]]
    build_type: NotRequired[str]
    cc: NotRequired[str]
    cxx: NotRequired[str]
    patches: NotRequired[list[Patch]]
    lto: NotRequired[bool]
    myrocks: NotRequired[bool]


RecipeKey = Literal[
    "cc",
    "cxx",
    "build_type",
    "cflags",
    "ldflags",
    "configure",
    "cmake",
    "patches",
    "lto",
    "myrocks",
]

# What a flavor's recipe may say, per family (flavors.toml and the lab file's
# [flavors.<family>.<name>] tables): compilers, flags, configure or cmake options and
# patches by version range.
RECIPE_KEYS: dict[str, tuple[RecipeKey, ...]] = {
    "postgres": ("cc", "cflags", "ldflags", "configure", "patches"),
    "mysql": ("cc", "cxx", "build_type", "cflags", "ldflags", "cmake", "patches", "lto", "myrocks"),
    "rocksdb": ("cc", "cxx", "build_type", "cflags", "ldflags", "cmake", "patches"),
}
# The recipe keys that are switches (true or false), not text or lists.
SWITCHES = ("lto", "myrocks")
_RANGE = re.compile(r"^\s*(>=|<=|==|=|>|<)\s*(\d+(?:\.\d+)*)\s*$")
_COMPARE = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "==": operator.eq,
    "=": operator.eq,
}


def check_range(text: str) -> str | None:
    """None when `text` is a version range like ">=8.0.0, <8.0.20" (empty: every
    version), else what is wrong with it."""
    for part in filter(None, (s.strip() for s in text.split(","))):
        if not _RANGE.match(part):
            return (
                f'{part!r} is not a bound; write bounds like ">=8.0.0, <8.0.20" '
                "(>=, >, <=, <, == and a version)"
            )
    return None


def in_range(version: tuple[int, ...], text: str) -> bool:
    """Whether `version` satisfies every bound of the range `text`."""
    for part in filter(None, (s.strip() for s in text.split(","))):
        m = _RANGE.match(part)
        if m is None:
            raise ValueError(check_range(text))
        bound = tuple(int(x) for x in m.group(2).split("."))
        width = max(len(version), len(bound))
        v = version + (0,) * (width - len(version))
        b = bound + (0,) * (width - len(bound))
        if not _COMPARE[m.group(1)](v, b):
            return False
    return True


def patch_entry(file: Path, versions: str) -> Patch:
    """A recipe's patch: its path, the versions of the tree it applies to and its
    content's digest (part of the build's cache key: an edited patch is another build)."""
    return {
        "file": str(file),
        "versions": versions,
        "sha256": sha256(file),
    }


def tree_version(engine: str, tree: Path) -> tuple[int, ...] | None:
    """The version of the source in `tree`: PostgreSQL's configure (PACKAGE_VERSION),
    the MySQL family's VERSION (MariaDB, MySQL 5.x) or MYSQL_VERSION (MySQL 8) file,
    RocksDB's include/rocksdb/version.h. None when the tree does not say."""
    if FAMILY.get(engine) == "rocksdb":
        header = tree / "include/rocksdb/version.h"
        text = header.read_text(errors="replace") if header.is_file() else ""
        found = dict(re.findall(r"#define ROCKSDB_(MAJOR|MINOR|PATCH)\s+(\d+)", text))
        if len(found) == 3:
            return int(found["MAJOR"]), int(found["MINOR"]), int(found["PATCH"])
        return None
    if FAMILY.get(engine) == "postgres":
        configure = tree / "configure"
        text = configure.read_text(errors="replace") if configure.is_file() else ""
        m = re.search(r"^PACKAGE_VERSION='(\d+(?:\.\d+)*)", text, re.MULTILINE)
        return tuple(int(x) for x in m.group(1).split(".")) if m else None
    for name in ("MYSQL_VERSION", "VERSION"):
        f = tree / name
        if not f.is_file():
            continue
        parts = dict(
            re.findall(
                r"^MYSQL_VERSION_(MAJOR|MINOR|PATCH)\s*=\s*(\d+)",
                f.read_text(errors="replace"),
                re.MULTILINE,
            )
        )
        if len(parts) == 3:
            return int(parts["MAJOR"]), int(parts["MINOR"]), int(parts["PATCH"])
    return None


def flavors(engine: str) -> dict[str, RawRecipe]:
    """The flavors shipped for `engine`'s family (flavors.toml, whose tables are raw
    recipes)."""
    text = resources.files("dbregress.provision").joinpath("flavors.toml").read_text()
    shipped = cast(dict[str, RawRecipe], tomllib.loads(text).get(FAMILY.get(engine, engine), {}))
    return dict(shipped)


def recipe(engine: str, flavor: str) -> Recipe:
    known = flavors(engine)
    if flavor not in known:
        raise BuildNotFound(
            f"unknown flavor {flavor!r} for {engine}; known: {', '.join(sorted(known))} "
            "(docs/engines.md, Builds from source)"
        )
    return normalized(FAMILY.get(engine, engine), known[flavor])


def normalized(family: str, r: RawRecipe) -> Recipe:
    """A recipe (a shipped flavor's or a lab's) with its defaults written out, as the
    build and its cache key read it. A key left out is the shipped release flavor's
    (`rel`; `debug` for a Debug build type): its flags (with -DNDEBUG for the cmake
    families, whose flavor flags replace cmake's own -DNDEBUG), linker flags and
    options, the cmake families' build type Release; cc, cxx, patches and the switches
    only when given."""
    base = _defaults(family, r)
    cflags = str(r.get("cflags", base.get("cflags", "-O2")))
    ldflags = str(r.get("ldflags", base.get("ldflags", "")))
    how: Recipe
    if family in ("mysql", "rocksdb"):
        cmake = r.get("cmake", base.get("cmake", []))
        how = {"cflags": cflags, "ldflags": ldflags, "cmake": [str(o) for o in cmake]}
        how["build_type"] = str(r.get("build_type", base.get("build_type", "Release")))
    else:
        configure = r.get("configure", base.get("configure", []))
        how = {"cflags": cflags, "ldflags": ldflags, "configure": [str(o) for o in configure]}
    for key in ("cc", "cxx"):
        if key in r:
            how[key] = str(r[key])
    if "patches" in r:
        how["patches"] = r["patches"]
    if "lto" in r:
        how["lto"] = bool(r["lto"])
    if "myrocks" in r:
        how["myrocks"] = bool(r["myrocks"])
    return how


def _defaults(family: str, r: RawRecipe) -> RawRecipe:
    """The shipped flavor whose values a recipe's missing keys take: the family's
    `debug` for a Debug build type, else its `rel` ({} for a family without flavors;
    a shipped flavor that is itself the default gives every key it needs)."""
    shipped = flavors(family)
    name = "debug" if str(r.get("build_type", "")).lower() == "debug" else DEFAULT_FLAVOR
    base = shipped.get(name, {})
    return {} if base is r or base == r else base


def select_patches(spec: BuildSpec, how: Recipe, tree: Path) -> list[Patch]:
    """The recipe's patches whose version range holds the tree's version; a patch whose
    file changed since the lab named it is an error (the build's key holds its digest)."""
    patches = list(how.get("patches", []))
    if not patches:
        return []
    version = tree_version(spec.engine, tree)
    ranged = [p for p in patches if p.get("versions", "").strip()]
    if ranged and version is None:
        raise ProvisionError(
            f"{spec}: the flavor's patches apply by version, but the tree does not say its "
            "version (no PACKAGE_VERSION in configure, no VERSION or MYSQL_VERSION file)"
        )
    chosen = []
    for p in patches:
        f = Path(p["file"])
        if not f.is_file() or sha256(f) != p["sha256"]:
            raise ProvisionError(
                f"{spec}: patch {f} is missing or changed since the lab was read; run again"
            )
        if version is None or in_range(version, p.get("versions", "")):
            chosen.append(p)
    return chosen
