"""The lab file's own compile flavors for source builds, beside the shipped ones:

    [flavors.mysql.rel_o3_clang]        # family: postgres, mysql (MariaDB, MySQL, ...), rocksdb
    cc = "clang"
    cxx = "clang++"
    cflags = "-O3 -DNDEBUG"
    cmake = ["-DWITH_JEMALLOC=no"]
    patches = [{ file = "patches/gcc13.patch", versions = "<8.0.30" }]

A column names one as `mysql@src:/path/to/tree+rel_o3_clang`. The recipe travels with
the column's build spec (BuildSpec.recipe), so every lane and every fleet worker that
reads the lab builds the same thing; the recipe, the patches' digests and the compiler's
version are the build's cache key. Patch paths are relative to the lab file."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from dbregress.lab.columns import Column
from dbregress.model.tomlreader import TableReader, short
from dbregress.provision import BuildSpec, source

Flavors = dict[str, dict[str, str]]  # family -> flavor name -> recipe (JSON)


def read_flavors(top: TableReader) -> Flavors:
    raw = top.get("flavors", dict, {})
    out: Flavors = {}
    families = top.child("flavors", raw)
    for family in raw:
        if family not in source.RECIPE_KEYS:
            raise families.fail(
                family,
                f"flavors are per engine family; known: {', '.join(source.RECIPE_KEYS)} "
                "(mysql covers mariadb@src: and mysql@src:)",
            )
        names = families.child(family, families.get(family, dict))
        shipped = source.flavors(family)
        for name in names.data:
            if name in shipped:
                raise names.fail(
                    name, f"{short(name)} is a shipped flavor; give yours another name"
                )
            if not source.FLAVOR_NAME.match(name):
                raise names.fail(name, "a flavor's name is letters, digits and '_'")
            r = names.child(name, names.get(name, dict))
            out.setdefault(family, {})[name] = json.dumps(
                _recipe(r, family, top.path.parent), sort_keys=True
            )
    return out


# Where a build installs is dbregress's (its cache directory; PostgreSQL's one fixed
# prefix, provision/source/build.py): a flavor that moved it, one of its directories or
# its programs' names would install elsewhere. configure (autoconf) takes each of these
# options as -NAME, or as --NAME cut to any length down to the shortest its own parser
# lists (--p is --prefix, --ex --exec-prefix, --bi --bindir), each with =VALUE or the
# value as the next word; and variables as NAME=VALUE. cmake takes -DNAME[:TYPE]=VALUE.
_AUTOCONF_PLACES = {  # option: its shortest abbreviation (autoconf 2.69's configure)
    "prefix": "p",
    "exec-prefix": "ex",
    "exec_prefix": "exec_",
    "bindir": "bi",
    "sbindir": "sb",
    "libexecdir": "libe",
    "datarootdir": "datar",
    "datadir": "datad",
    "sysconfdir": "sy",
    "sharedstatedir": "sh",
    "localstatedir": "locals",
    "runstatedir": "runs",
    "includedir": "inc",
    "oldincludedir": "o",
    "docdir": "do",
    "infodir": "inf",
    "htmldir": "ht",
    "dvidir": "dv",
    "pdfdir": "pd",
    "psdir": "ps",
    "libdir": "libd",
    "localedir": "locale",
    "mandir": "m",
    "program-prefix": "program-p",
    "program-suffix": "program-s",
    "program-transform-name": "program-t",
    "srcdir": "sr",  # not a place to install, but another tree than the one keyed
}
# configure sets any variable given as NAME=VALUE; CONFIG_SITE names a script that may
# set the prefix
_CONFIGURE_VARIABLE = re.compile(r"^(prefix|exec_prefix|\w*dir|DESTDIR|program_\w+|CONFIG_SITE)=")
_CMAKE_PLACES = re.compile(
    r"^((-D\s*)?(CMAKE_INSTALL_\w+|INSTALL_\w+|CMAKE_STAGING_PREFIX)(:\w+)?=|--install-prefix(=|$))"
)


def _configure_places(option: str) -> bool:
    name = option.split("=", 1)[0]
    if name.startswith("--"):
        cut = name[2:]
        return any(
            full.startswith(cut) and len(cut) >= len(least)
            for full, least in _AUTOCONF_PLACES.items()
        )
    return name.startswith("-") and name[1:] in _AUTOCONF_PLACES


def places_install(option: str) -> bool:
    """Whether a configure or cmake option would move where the build installs, rename
    what it installs, or build another source tree (--srcdir)."""
    return bool(
        _configure_places(option)
        or _CONFIGURE_VARIABLE.match(option)
        or _CMAKE_PLACES.match(option)
    )


def _recipe(r: TableReader, family: str, base: Path) -> source.Recipe:
    """The table's recipe, each key of its family type-checked (a key of the other
    family, or a misspelt one, is an unknown key), its defaults written by
    source.normalized as a shipped flavor's are."""
    raw: source.RawRecipe = {}
    for key in source.RECIPE_KEYS[family]:
        if key == "patches" or key not in r.data:
            continue
        if key in source.SWITCHES:
            raw[key] = r.get(key, bool)
            continue
        if key in ("configure", "cmake"):
            options = r.get(key, list)
            if not all(isinstance(o, str) for o in options):
                raise r.fail(key, "must be a list of strings")
            placed = [o for o in options if places_install(o)]
            if placed:
                raise r.fail(
                    key,
                    f"{placed[0]!r}: dbregress chooses where a build installs "
                    "(and its source tree)",
                )
            raw[key] = options
        else:
            raw[key] = r.get(key, str)
    patches = r.get("patches", list, [])
    if patches:
        raw["patches"] = [_patch(r, i, p, base) for i, p in enumerate(patches)]
    r.reject_unknown()
    return source.normalized(family, raw)


def _patch(r: TableReader, i: int, item: Any, base: Path) -> source.Patch:
    if not isinstance(item, dict):
        raise r.fail("patches", 'each patch is a table: { file = "x.patch", versions = "<8.0.20" }')
    p = r.child(f"patches[{i}]", item)
    file = Path(p.require("file", str))
    file = file if file.is_absolute() else (base / file).resolve()
    if not file.is_file():
        raise p.fail("file", f"no patch file {file}")
    versions = p.get("versions", str, "")
    wrong = source.check_range(versions)
    if wrong:
        raise p.fail("versions", wrong)
    p.reject_unknown()
    return source.patch_entry(file, versions)


def attach(
    top: TableReader, columns: tuple[Column, ...], flavors: Flavors, where: str
) -> tuple[Column, ...]:
    """The columns with each source build's lab-defined flavor attached; a source
    build whose flavor is neither shipped nor defined in the lab names both lists."""
    out = []
    for j, column in enumerate(columns):
        spec = column.build
        family = source.FAMILY.get(spec.engine) if spec.is_source else None
        if family is None:
            out.append(column)
            continue
        flavor = source.SourceSpec.parse(spec).flavor
        mine = flavors.get(family, {})
        if flavor in mine:
            spec = BuildSpec(spec.engine, spec.version, mine[flavor])
            column = dataclasses.replace(column, build=spec)
        elif flavor not in source.flavors(family):
            known = sorted({*source.flavors(family), *mine})
            raise top.child(f"{where}column[{j}]", {}).fail(
                "build",
                f"unknown flavor {short(flavor)} for {spec.engine}; known: {', '.join(known)} "
                f"(shipped, or [flavors.{family}.NAME] in the lab file)",
            )
        out.append(column)
    return tuple(out)
