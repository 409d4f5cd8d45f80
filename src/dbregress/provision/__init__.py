"""Where builds come from: a spec like `postgres@17.2.0` becomes a `Build` on disk.

Sources: Maven Central through `mvn` (maven.py), the machine's packages (`@system`,
local.py), a user's own build directory (`@/path`, local.py) and a source tree that
dbregress builds in a named flavor (`@src:PATH[#REF][+FLAVOR]`, provision/source/), for PostgreSQL,
MariaDB and MySQL (with Percona and FB MySQL: user builds only; MySQL-family specifics
are in mysql.py) and RocksDB (a library, not a server: rocksdb.py provisions its shared
library from the same three sources). Fetched builds live in a cache keyed by the spec
(cache.py), unpacked atomically.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from dbregress.model.errors import BuildNotFound

# `null` is no engine: its loadgen driver does nothing (tests of the scheduler, the
# fleet and the reports; engines/null.py).
ENGINES = ("postgres", "mariadb", "mysql", "rocksdb", "null")


@dataclass(frozen=True)
class BuildSpec:
    """What the user wrote: engine and version, `system`, or a path to their own build."""

    engine: str
    version: str  # "17.2.0", "system", or an absolute path
    # A source build's flavor defined in the lab file (its recipe as JSON, written by
    # source.user_flavors); empty: the flavor is one flavors.toml ships.
    recipe: str = ""

    @property
    def is_path(self) -> bool:
        return self.version.startswith("/")

    @property
    def is_system(self) -> bool:
        return self.version == "system"

    @property
    def is_source(self) -> bool:
        """A source tree to build (`src:PATH[#REF][+FLAVOR]`, provision/source/)."""
        return self.version.startswith("src:")

    def __str__(self) -> str:
        return f"{self.engine}@{self.version}"

    @staticmethod
    def parse(text: str) -> BuildSpec:
        engine, sep, version = text.partition("@")
        if not sep or not engine or not version:
            raise BuildNotFound(
                f"build {text!r} is not of the form ENGINE@VERSION "
                "(e.g. postgres@17.2.0, postgres@system, mariadb@11.4.5, "
                "mysql@/path/to/basedir, rocksdb@10.2.1, rocksdb@/path/to/librocksdb.so, "
                "postgres@src:/path/to/tree#commit+flavor)"
            )
        if engine not in ENGINES:
            raise BuildNotFound(
                f"unknown engine {engine!r} in {text!r}; known: {', '.join(ENGINES)}"
            )
        if version.startswith("src:"):
            from dbregress.provision import source  # it imports this module

            return source.canonical(BuildSpec(engine, version))
        if version.startswith("~") or version.startswith("."):
            version = str(Path(os.path.expanduser(version)).resolve())
        elif _is_library_name(version):
            version = str(Path(version).absolute())
        return BuildSpec(engine, version)


def _is_library_name(version: str) -> bool:
    """A relative path to a shared library (`build/librocksdb.so`), not a version."""
    return ".so" in Path(version).name and not version.startswith("/") and not version[0].isdigit()


@dataclass(frozen=True)
class Build:
    """A build on disk, ready to start.

    `basedir` holds bin/ (and lib/, share/ where the build has them); for an embedded
    engine, the directory of its library. `identity` is what the results store records
    about it (source, coordinates, the binary's own version string, ...).
    An embedded engine (RocksDB) is a shared library: `library` is its path and
    `library_version` the version the library itself reports (e.g. "10.2.1").
    """

    spec: BuildSpec
    basedir: Path
    version_string: str  # what the binary says of itself, e.g. "postgres (PostgreSQL) 17.2"
    identity: dict[str, str] = field(default_factory=dict)
    library: Path | None = None
    library_version: str = ""

    def bin(self, name: str) -> Path:
        return self.basedir / "bin" / name


def fetch(spec: BuildSpec) -> Build:
    """Make the build of `spec` available on disk (fetching and caching it if needed).

    Dispatch: `@system` and `@/path` are local (local.py); versions come from Maven
    Central (maven.py). The Build's identity records the source, coordinates or path, the
    binary's version string and, for downloads, the artifact's sha256.
    """
    from dbregress.provision import local, maven, rocksdb, source  # they import this module

    if spec.engine not in ENGINES:
        raise BuildNotFound(f"unknown engine {spec.engine!r}; known: {', '.join(ENGINES)}")
    if spec.is_source:
        return source.fetch(spec)
    if spec.engine == "rocksdb":
        return rocksdb.fetch(spec)
    if spec.engine == "null":
        return Build(spec, Path("/"), "null engine (no database)", {"source": "null"})
    if spec.is_system:
        return local.fetch_system(spec)
    if spec.is_path:
        return local.fetch_path(spec)
    return maven.fetch(spec)


def versions(engine: str) -> list[str]:
    """Versions of `engine` that `fetch` can get, sorted numerically (oldest first)."""
    from dbregress.provision import maven

    if engine not in ENGINES:
        raise BuildNotFound(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    if engine not in maven.ARTIFACTS:
        raise BuildNotFound(
            f"{engine} builds are not on Maven Central, so there is no version list; use "
            f"{engine}@/path/to/basedir (your own build) or {engine}@system"
        )
    return maven.available_versions(engine)
