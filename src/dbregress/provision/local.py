"""Builds already on this machine: `ENGINE@system` and `ENGINE@/path/to/basedir`.

PostgreSQL is handled here; the MySQL family (mariadb, mysql) by provision/mysql.py,
dispatched from the two fetch functions.

A build's identity names its server binary's SHA-256 (`binary_sha256`, of bin/postgres
or of the MySQL family's server): a basedir rebuilt at another commit keeps its path and,
often, its version string, and its counts must not be taken for the earlier build's
(method.build_key keys the cost verdicts' history floor by the identity).
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
from pathlib import Path

from dbregress.model.errors import BuildNotFound, ProvisionError
from dbregress.provision import Build, BuildSpec, mysql
from dbregress.provision.libenv import library_env
from dbregress.provision.versioning import version_key

SYSTEM_ROOT = Path("/usr/lib/postgresql")
REQUIRED = ("postgres", "initdb")
MYSQL_FAMILY = ("mariadb", "mysql")


def postgres_version(basedir: Path) -> str:
    """What `bin/postgres --version` says, e.g. `postgres (PostgreSQL) 17.2`."""
    binary = basedir / "bin" / "postgres"
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            env=library_env(basedir),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError as e:
        raise ProvisionError(f"cannot run {binary} --version: {e}") from e
    if done.returncode != 0 or not done.stdout.strip():
        raise ProvisionError(
            f"{binary} --version failed (exit {done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[-500:]}; is a library missing?"
        )
    return done.stdout.strip()


@functools.cache
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """The file's SHA-256 (its first 16 hex digits), read once a process per (path,
    size, modification time): a server binary is tens to hundreds of MB."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def binary_sha256(binary: Path) -> str:
    """The SHA-256 of a build's server binary (the file a symlink names), as its
    identity records it; ProvisionError naming the file when it cannot be read."""
    try:
        st = binary.stat()
        return _sha256(str(binary.resolve()), st.st_size, st.st_mtime_ns)
    except OSError as e:
        raise ProvisionError(f"cannot read {binary} to name the build: {e}") from e


def missing_binaries(basedir: Path) -> list[str]:
    return [name for name in REQUIRED if not os.access(basedir / "bin" / name, os.X_OK)]


def system_basedir() -> Path:
    """The newest /usr/lib/postgresql/<major> with bin/postgres and bin/initdb."""
    majors = sorted(
        (d for d in SYSTEM_ROOT.glob("*") if d.is_dir() and not missing_binaries(d)),
        key=lambda d: version_key(d.name),
    )
    if not majors:
        raise BuildNotFound(
            f"postgres@system: no PostgreSQL server under {SYSTEM_ROOT}/<major>/bin; "
            "install one with `apt-get install postgresql`"
        )
    return majors[-1]


def fetch_system(spec: BuildSpec) -> Build:
    if spec.engine in MYSQL_FAMILY:
        return _fetch_mysql(spec, mysql.system_basedir(spec.engine), "system")
    basedir = system_basedir()
    version = postgres_version(basedir)
    identity = {
        "source": "system",
        "path": str(basedir),
        "version_string": version,
        "binary_sha256": binary_sha256(basedir / "bin" / "postgres"),
    }
    return Build(spec, basedir, version, identity)


def fetch_path(spec: BuildSpec) -> Build:
    basedir = Path(spec.version)
    if not basedir.is_dir():
        raise BuildNotFound(f"{spec}: {basedir} is not a directory")
    if spec.engine in MYSQL_FAMILY:
        return _fetch_mysql(spec, basedir, "path")
    missing = missing_binaries(basedir)
    if missing:
        raise BuildNotFound(
            f"{spec}: {basedir} is not a PostgreSQL basedir; missing executable "
            f"{', '.join('bin/' + m for m in missing)} (give the directory holding bin/)"
        )
    version = postgres_version(basedir)
    identity = {
        "source": "path",
        "path": str(basedir),
        "version_string": version,
        "binary_sha256": binary_sha256(basedir / "bin" / "postgres"),
    }
    return Build(spec, basedir, version, identity)


def _fetch_mysql(spec: BuildSpec, basedir: Path, source: str) -> Build:
    """A MySQL-family build on this machine; `mariadb@` insists on MariaDB, `mysql@` takes
    any of the family (MySQL, Percona, FB MySQL, MariaDB)."""
    line, version = mysql.server_version(basedir, str(spec))
    if spec.engine == "mariadb" and not version.is_mariadb:
        raise BuildNotFound(
            f"{spec}: {basedir} holds {version}, not MariaDB ({line!r}); write mysql@{basedir}"
        )
    binary = mysql.server_binary(basedir)
    identity = {
        "source": source,
        "path": str(basedir),
        "version_string": line,
        "flavor": version.flavor,
        "version": ".".join(map(str, version.version)),
    }
    if binary is not None:  # server_version found it
        identity["binary_sha256"] = binary_sha256(binary)
    return Build(spec, basedir, line, identity)
