"""Builds from a source tree: `postgres@src:PATH[#REF][+FLAVOR]`, `mariadb@src:...`,
`mysql@src:...`, `rocksdb@src:...`.

PATH is a PostgreSQL source tree (configure), a MySQL-family one (cmake: MariaDB, MySQL,
Percona Server, FB MySQL) or a RocksDB one (cmake; the shared library with the C API
the loadgen loads): a git checkout or an unpacked tarball (Debian's `apt-get source
postgresql-15`, `apt-get source mariadb` or `apt-get source rocksdb` gives one).
`mariadb@src:` insists that the server it builds is MariaDB; `mysql@src:` takes any of
the family. REF, a commit, tag or branch of a git checkout, builds that commit: its
files and its submodules' files at the commits it records are exported into a
directory of dbregress's own, so the user's checkout, index and worktree list are never
touched. Without REF the tree is built as it is on disk, uncommitted changes included
(in a git work tree: what git would commit; what it ignores is build output).
FLAVOR names a compile recipe (default `rel`): one of flavors.toml, per engine family,
or a lab file's own.

The parts: spec.py (what a spec names), recipes.py (flavors and patches), tree.py (git:
export, digest, commit ranges), worktree.py (a tree built as it is on disk: which files
are its source, their digest, a copy), key.py (the cache key and its inputs), needs.py
(the libraries a build cannot configure without), build.py (the steps), cmake.py (the
MySQL family's cmake command line, per project) and rocksdb_build.py (RocksDB's).
"""

from __future__ import annotations

from dbregress.provision.source.build import fetch, last_error, plan, why
from dbregress.provision.source.recipes import (
    RECIPE_KEYS,
    SWITCHES,
    Patch,
    RawRecipe,
    Recipe,
    check_range,
    flavors,
    in_range,
    normalized,
    patch_entry,
    recipe,
    tree_version,
)
from dbregress.provision.source.spec import (
    BUILDERS,
    DEFAULT_FLAVOR,
    FAMILY,
    FLAVOR_NAME,
    PREFIX,
    SourceSpec,
    canonical,
    require_tree,
)
from dbregress.provision.source.tree import (
    Commit,
    branch_point,
    commits_between,
    list_tags,
    parents_of,
    resolve_commit,
    subject_and_date,
    tree_digest,
)

__all__ = [
    "BUILDERS",
    "DEFAULT_FLAVOR",
    "FAMILY",
    "FLAVOR_NAME",
    "PREFIX",
    "RECIPE_KEYS",
    "SWITCHES",
    "Commit",
    "Patch",
    "RawRecipe",
    "Recipe",
    "SourceSpec",
    "branch_point",
    "canonical",
    "check_range",
    "commits_between",
    "fetch",
    "flavors",
    "in_range",
    "last_error",
    "list_tags",
    "normalized",
    "parents_of",
    "patch_entry",
    "plan",
    "recipe",
    "require_tree",
    "resolve_commit",
    "subject_and_date",
    "tree_digest",
    "tree_version",
    "why",
]
