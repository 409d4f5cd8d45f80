"""RocksDB builds: one shared library exporting the C API, which the loadgen dlopens.

- `rocksdb@10.2.1`: the jar `org.rocksdb:rocksdbjni:<version>` from Maven Central
  (maven.py); only its glibc x86-64 library, `librocksdbjni-linux64.so`, goes into the
  cache (not the -musl one, nor the other platforms'; the jar is 50-75 MB).
- `rocksdb@system`: Debian's `librocksdb<X.Y>` (`/usr/lib/x86_64-linux-gnu/librocksdb.so.X.Y`).
- `rocksdb@/path/to/librocksdb.so`: a user's own build (or a directory holding one).

Every library is probed in a child process before it is used: it must load, export
`rocksdb_open` and open a scratch database, whose OPTIONS file (or LOG) states the exact
RocksDB version. A library that crashes the probe cannot take dbregress down with it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from dbregress.model.errors import BuildNotFound, ProvisionError
from dbregress.provision import Build, BuildSpec, cache, maven
from dbregress.provision.versioning import closest, sort_versions, version_key

JAR_LIBRARY = "librocksdbjni-linux64.so"
SYSTEM_LIB_DIRS = (Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/lib"), Path("/usr/local/lib"))
SYSTEM_PACKAGE_HINT = "librocksdb7.8"  # Debian 12's; other releases ship librocksdbX.Y
PROBE_TIMEOUT_S = 60.0
# rocksdbjni jars seen here to hold librocksdbjni-linux64.so that opened a database
VERIFIED_JARS = ("3.5.1", "4.13.5", "5.0.1", "6.20.3", "6.22.1", "7.10.2", "8.11.4", "10.2.1")
_SONAME = re.compile(r"librocksdb\.so\.(\d+\.\d+(?:\.\d+)?)$")

# Runs in a child process: load the library, open a scratch database, report its version.
_PROBE = r"""
import ctypes, json, os, re, sys
path, scratch = sys.argv[1], sys.argv[2]
def done(**out):
    print(json.dumps(out)); sys.exit(0)
try:
    lib = ctypes.CDLL(path)
except OSError as e:
    done(error=f"it cannot be loaded: {e}")
if not hasattr(lib, "rocksdb_open"):
    done(error="it does not export rocksdb_open (not a RocksDB library with the C API)")
vp = ctypes.c_void_p
lib.rocksdb_options_create.restype = vp
lib.rocksdb_options_set_create_if_missing.argtypes = [vp, ctypes.c_ubyte]
lib.rocksdb_open.restype = vp
lib.rocksdb_open.argtypes = [vp, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)]
lib.rocksdb_close.argtypes = [vp]
lib.rocksdb_options_destroy.argtypes = [vp]
opts = lib.rocksdb_options_create()
lib.rocksdb_options_set_create_if_missing(opts, 1)
err = ctypes.c_char_p()
db = lib.rocksdb_open(opts, os.path.join(scratch, "db").encode(), ctypes.byref(err))
if err.value or not db:
    done(error=f"it cannot open a scratch database: {(err.value or b'').decode(errors='replace')}")
lib.rocksdb_close(db)
lib.rocksdb_options_destroy(opts)
for name, pattern in (("OPTIONS-", r"rocksdb_version=(\d+\.\d+(?:\.\d+)?)"),
                      ("LOG", r"RocksDB version: (\d+\.\d+(?:\.\d+)?)")):
    for f in sorted(os.listdir(os.path.join(scratch, "db"))):
        if f.startswith(name):
            m = re.search(pattern, open(os.path.join(scratch, "db", f), errors="replace").read())
            if m:
                done(version=m.group(1))
done(version=None)
"""


def probe(library: Path) -> str | None:
    """The RocksDB version `library` reports of itself (None if it does not say).

    Raises ProvisionError if it cannot be loaded, is not RocksDB, or cannot open a database.
    """
    with tempfile.TemporaryDirectory(prefix="dbregress-rocksdb-probe-") as scratch:
        try:
            done = subprocess.run(
                [sys.executable, "-c", _PROBE, str(library), scratch],
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise ProvisionError(f"{library}: opening a scratch database hung") from e
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ProvisionError(
            f"{library}: probing the library failed (exit {done.returncode}): "
            f"{done.stderr.strip()[-500:]}"
        ) from None
    if "error" in result:
        raise ProvisionError(f"{library}: {result['error']}")
    return str(result["version"]) if result.get("version") else None


def version_from_name(library: Path) -> str | None:
    """X.Y[.Z] from a name like librocksdb.so.7.8.3 (the file or what it links to)."""
    for name in (library.name, library.resolve().name):
        match = _SONAME.search(name)
        if match:
            return match.group(1)
    return None


def library_version(library: Path, spec: BuildSpec, fallback: str | None = None) -> str:
    """The library's own word, else `fallback`, else its file name; an error if none."""
    version = probe(library) or fallback or version_from_name(library)
    if version is None:
        raise ProvisionError(
            f"{spec}: cannot tell the RocksDB version of {library}: a scratch database's "
            "OPTIONS and LOG files do not state it and the file name has none; rename it "
            "librocksdb.so.X.Y.Z"
        )
    return version


def make_build(spec: BuildSpec, library: Path, version: str, identity: dict[str, str]) -> Build:
    identity = {**identity, "library_version": version, "version_string": f"RocksDB {version}"}
    return Build(spec, library.parent, f"RocksDB {version}", identity, library, version)


# -- Maven Central --------------------------------------------------------------------


def no_linux64_message(spec: BuildSpec, names: list[str], verified: list[str]) -> str:
    natives = sorted(n for n in names if n.endswith((".so", ".jnilib", ".dll", ".dylib")))
    holds = ", ".join(natives) if natives else "no native library at all"
    others = [v for v in verified if v != spec.version]
    near = closest(spec.version, others, count=4) if others else []
    advice = f"; versions whose jar has it: {', '.join(near)}" if near else ""
    return (
        f"{spec}: the rocksdbjni {spec.version} jar has no glibc linux x86-64 library "
        f"({JAR_LIBRARY}); it holds {holds}{advice} (see `dbregress versions rocksdb`)"
    )


def verified_versions() -> list[str]:
    """Versions known to have the library: verified here, or already in the cache."""
    root = cache.cache_root() / "rocksdb"
    cached = [d.name for d in root.glob("*") if cache.read_spec(d) is not None]
    return sort_versions([*VERIFIED_JARS, *cached])


def unpack_jar(spec: BuildSpec, jar: Path, dest: Path) -> dict[str, str]:
    """Extract only librocksdbjni-linux64.so into dest, probe it, return its identity."""
    with zipfile.ZipFile(jar) as archive:
        names = archive.namelist()
        if JAR_LIBRARY not in names:
            raise BuildNotFound(no_linux64_message(spec, names, verified_versions()))
        target = dest / JAR_LIBRARY
        with archive.open(JAR_LIBRARY) as src, open(target, "wb") as out:
            while block := src.read(1 << 20):
                out.write(block)
    target.chmod(0o755)
    jar_version = ".".join(spec.version.split(".")[:3])  # 6.22.1.1 is a rebuild of 6.22.1
    return {"library": JAR_LIBRARY, "library_version": library_version(target, spec, jar_version)}


def fetch_maven(spec: BuildSpec) -> Build:
    version = maven.resolve_version(spec)
    resolved = BuildSpec(spec.engine, version)
    final, identity = maven.fetch_jar(
        resolved, version, lambda jar, dest: unpack_jar(resolved, jar, dest)
    )
    library = final / identity.get("library", JAR_LIBRARY)
    return make_build(spec, library, identity["library_version"], identity)


# -- this machine ---------------------------------------------------------------------


def system_library() -> Path:
    """The newest librocksdb.so.X.Y in the system's library directories."""
    found = [
        path
        for directory in SYSTEM_LIB_DIRS
        for path in directory.glob("librocksdb.so.*")
        if re.fullmatch(r"librocksdb\.so\.\d+\.\d+", path.name)
    ]
    if not found:
        raise BuildNotFound(
            f"rocksdb@system: no librocksdb.so.X.Y under "
            f"{', '.join(str(d) for d in SYSTEM_LIB_DIRS)}; install Debian's with "
            f"`apt-get install {SYSTEM_PACKAGE_HINT}` (other releases: "
            "`apt-cache search librocksdb`)"
        )
    return max(found, key=lambda p: version_key(p.name))


def dpkg_version(package: str) -> str | None:
    """The upstream version of an installed Debian package (7.8.3 of 7.8.3-2)."""
    try:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return None
    match = re.match(r"(?:\d+:)?(\d+\.\d+(?:\.\d+)?)", done.stdout.strip())
    return match.group(1) if done.returncode == 0 and match else None


def fetch_system(spec: BuildSpec) -> Build:
    library = system_library()
    package = f"librocksdb{library.name.removeprefix('librocksdb.so.')}"
    packaged = dpkg_version(package)
    version = library_version(library, spec, fallback=packaged)
    identity = {"source": "system", "path": str(library), "package": package}
    if packaged:
        identity["package_version"] = packaged
    return make_build(spec, library, version, identity)


def user_library(spec: BuildSpec) -> Path:
    """The library a path names: the file itself, or the one librocksdb.so* in a directory."""
    path = Path(spec.version)
    if path.is_dir():
        candidates = sorted(path.glob("librocksdb.so*"), key=lambda p: version_key(p.name))
        if not candidates:
            raise BuildNotFound(f"{spec}: {path} holds no librocksdb.so*; give the library")
        return candidates[0]  # librocksdb.so itself sorts first
    if not path.is_file():
        raise BuildNotFound(f"{spec}: {path} does not exist; give the path of librocksdb.so")
    return path


def fetch_path(spec: BuildSpec) -> Build:
    library = user_library(spec)
    version = library_version(library, spec)
    identity = {"source": "path", "path": str(library), "sha256": maven.sha256(library)}
    return make_build(spec, library, version, identity)


def fetch(spec: BuildSpec) -> Build:
    if spec.is_system:
        return fetch_system(spec)
    if spec.is_path:
        return fetch_path(spec)
    return fetch_maven(spec)
