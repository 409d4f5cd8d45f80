"""The build cache: `<cache>/<engine>/<version>/`, installed atomically, shared safely.

A build is populated in a temporary sibling directory, gets a spec file recording what was
fetched and from where, and is then renamed into place, so a half-unpacked build never
appears under its final name. A lock file (fcntl) serialises concurrent installs of the
same build; leftovers of an interrupted install are removed by the next one.

When running as root the engines run as `nobody`, so everything in the cache is kept
readable and traversable by others (directories 0755).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dbregress.model.errors import ProvisionError

SPEC_FILE = "dbregress-build.json"
_TMP_PREFIX = ".tmp-"


def cache_root() -> Path:
    """DBREGRESS_CACHE, else /var/cache/dbregress for root, else ~/.cache/dbregress."""
    configured = os.environ.get("DBREGRESS_CACHE")
    if configured:
        return Path(configured).expanduser()
    if os.geteuid() == 0:
        return Path("/var/cache/dbregress")
    return Path.home() / ".cache" / "dbregress"


def make_dirs(path: Path) -> None:
    """Create `path` and its missing parents with mode 0755 (umask notwithstanding)."""
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir()
        except FileExistsError:
            continue
        except OSError as e:
            raise ProvisionError(f"cannot create cache directory {directory}: {e}") from e
        directory.chmod(0o755)


def make_public(root: Path) -> None:
    """Let others read everything under `root` and traverse its directories (u+rwX, go+rX)."""
    for dirpath, dirnames, filenames in os.walk(root):
        Path(dirpath).chmod(0o755)
        for name in filenames + dirnames:
            path = Path(dirpath) / name
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode) or stat.S_ISDIR(mode):
                continue
            executable = mode & 0o111
            path.chmod(0o755 if executable else 0o644)


@contextmanager
def locked(final: Path) -> Iterator[None]:
    """Hold an exclusive lock for installing `final` (a `.lock` file beside it)."""
    make_dirs(final.parent)
    lock_path = final.parent / f".{final.name}.lock"
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read_spec(final: Path) -> dict[str, str] | None:
    """The spec file of an installed build, or None if `final` is not a complete build."""
    try:
        data = json.loads((final / SPEC_FILE).read_text())
    except (OSError, ValueError):
        return None
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None


def remove_partials(final: Path) -> None:
    """Remove temporary directories left by interrupted installs of `final`."""
    for leftover in final.parent.glob(f"{_TMP_PREFIX}{final.name}-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def install(final: Path, populate: Callable[[Path], dict[str, str]]) -> dict[str, str]:
    """Return the spec of the build at `final`, populating it first if it is not there.

    `populate(tmpdir)` fills a fresh directory and returns what to record in the spec
    file; on any failure the directory is removed and the exception propagates.
    """
    spec = read_spec(final)
    if spec is not None:
        return spec
    with locked(final):
        spec = read_spec(final)  # another process may have installed it meanwhile
        if spec is not None:
            return spec
        remove_partials(final)
        if final.exists():  # a directory without a spec file is not a build: redo it
            shutil.rmtree(final)
        tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{final.name}-", dir=final.parent))
        try:
            spec = populate(tmp)
            (tmp / SPEC_FILE).write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")
            make_public(tmp)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return spec
