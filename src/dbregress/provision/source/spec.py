"""What `ENGINE@src:PATH[#REF][+FLAVOR]` names: the engine families built from source,
the tree, the commit and the flavor, and what makes a directory a family's tree."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from dbregress.model.errors import BuildNotFound
from dbregress.provision import BuildSpec

PREFIX = "src:"
DEFAULT_FLAVOR = "rel"
# Engines whose trees are built here, and the family whose flavors (flavors.toml) and
# recipe each uses.
FAMILY = {"postgres": "postgres", "mariadb": "mysql", "mysql": "mysql", "rocksdb": "rocksdb"}
BUILDERS = tuple(FAMILY)
FLAVOR_NAME = re.compile(r"^[A-Za-z0-9_]+$")
# Files that make a directory a family's source tree, and what the family is called.
TREE_FILES = {
    "postgres": ("configure", "src/backend/main/main.c"),
    "mysql": ("CMakeLists.txt", "sql/mysqld.cc"),
    "rocksdb": ("include/rocksdb/c.h", "db/c.cc"),
}
TREE_NAMES = {
    "postgres": "PostgreSQL",
    "mysql": "MySQL-family (MariaDB, MySQL, Percona, FB MySQL)",
    "rocksdb": "RocksDB",
}
TREE_TOP = {
    "postgres": "`configure`",
    "mysql": "the top `CMakeLists.txt`",
    "rocksdb": "`include/` and `db/`",
}


@dataclass(frozen=True)
class SourceSpec:
    """What follows `src:`: the tree, a ref to build (None: the tree as on disk) and the
    flavor."""

    path: Path
    ref: str | None
    flavor: str

    @staticmethod
    def parse(spec: BuildSpec) -> SourceSpec:
        text = spec.version.removeprefix(PREFIX)
        flavor = DEFAULT_FLAVOR
        head, plus, tail = text.rpartition("+")
        if plus and "/" not in tail and FLAVOR_NAME.match(tail):
            text, flavor = head, tail
        path_text, hash_, ref = text.partition("#")
        if not path_text:
            raise BuildNotFound(
                f"{spec}: no source tree; write {spec.engine}@src:/path/to/tree[#commit][+flavor]"
            )
        path = Path(os.path.expanduser(path_text)).resolve()
        return SourceSpec(path, ref if hash_ and ref else None, flavor)

    def __str__(self) -> str:
        ref = f"#{self.ref}" if self.ref else ""
        return f"{PREFIX}{self.path}{ref}+{self.flavor}"


def canonical(spec: BuildSpec) -> BuildSpec:
    """The spec with its path absolute and its flavor written out."""
    return BuildSpec(spec.engine, str(SourceSpec.parse(spec)), spec.recipe)


def require_tree(engine: str, path: Path) -> None:
    """BuildNotFound unless `path` is the top of a source tree of `engine`'s family."""
    if engine not in BUILDERS:
        raise BuildNotFound(
            f"{engine}@src: building {engine} from source is not supported; "
            f"source builds: {', '.join(BUILDERS)} (or give a build you made: "
            f"{engine}@/path/to/basedir)"
        )
    if not path.is_dir():
        raise BuildNotFound(f"{engine}@src:{path}: no such directory")
    family = FAMILY[engine]
    missing = [f for f in TREE_FILES[family] if not (path / f).is_file()]
    if missing:
        raise BuildNotFound(
            f"{engine}@src:{path}: not a {TREE_NAMES[family]} source tree "
            f"(no {', '.join(missing)}); give the top of the tree (where {TREE_TOP[family]} is)"
        )
