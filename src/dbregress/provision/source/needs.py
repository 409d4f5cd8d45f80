"""The libraries a source build cannot configure without, checked before anything is
configured: cmake's "Could NOT find Snappy" after a minute of configuring, deep in a
log, becomes one line naming the packages and the command that installs them.

Each family's fixed options make some libraries required (RocksDB's five compressions,
the MySQL family's system OpenSSL and zlib, MariaDB's system PCRE2 and fmt, the
clients' curses; PostgreSQL's configure wants readline and zlib unless told
otherwise). A library is there when the build's compiler finds its header (so one
installed under /usr/local, or given by CPATH, counts as it does for the build); the
Debian package named is the one that ships the header.
"""

from __future__ import annotations

import subprocess

from dbregress.model.errors import BuildNotFound

Header = tuple[str, str]  # (header, the Debian package that has it)

_ZLIB: Header = ("zlib.h", "zlib1g-dev")
_SSL: Header = ("openssl/ssl.h", "libssl-dev")
_CURSES: Header = ("curses.h", "libncurses-dev")
# source/rocksdb_build.py's FIXED_OPTIONS: -DWITH_SNAPPY=ON ... -DWITH_BZ2=ON
ROCKSDB: tuple[Header, ...] = (
    ("snappy.h", "libsnappy-dev"),
    ("lz4.h", "liblz4-dev"),
    ("zstd.h", "libzstd-dev"),
    ("bzlib.h", "libbz2-dev"),
    _ZLIB,
)
# source/cmake.py's options: -DWITH_SSL=system -DWITH_ZLIB=system (every kind),
# -DWITH_PCRE=system -DWITH_LIBFMT=system (MariaDB); the client's line editing needs curses
MARIADB: tuple[Header, ...] = (
    _SSL,
    _ZLIB,
    ("pcre2.h", "libpcre2-dev"),
    ("fmt/format.h", "libfmt-dev"),
    _CURSES,
)
MYSQL: tuple[Header, ...] = (_SSL, _ZLIB, _CURSES)
# configure's defaults: --with-readline and --with-zlib
POSTGRES: tuple[Header, ...] = (("readline/readline.h", "libreadline-dev"), _ZLIB)
# `make TARGET` installs a family's packages (the Makefile)
MAKE_TARGET = {
    "rocksdb": "rocksdb-source",
    "mariadb": "mariadb-source",
    "mysql": "mysql-source",
    "postgres": "debian",
}


def finds(compiler: str, header: str) -> bool:
    """Whether `compiler` finds `header` (its preprocessor, with the environment's
    CPATH and the like, as the build's own checks run it)."""
    # pcre2.h stops unless told its code unit width
    text = f"#define PCRE2_CODE_UNIT_WIDTH 8\n#include <{header}>\n"
    try:
        done = subprocess.run(
            [compiler, "-x", "c++" if "++" in compiler else "c", "-E", "-o", "/dev/null", "-"],
            input=text,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd="/",
        )
    except OSError:
        return False
    return done.returncode == 0


def check(spec: str, which: str, compiler: str, headers: tuple[Header, ...]) -> None:
    """BuildNotFound naming every header of `headers` that `compiler` does not find,
    the packages that have them and the command that installs them; `which` is the
    Makefile's name for the family (MAKE_TARGET)."""
    missing = [(h, p) for h, p in headers if not finds(compiler, h)]
    if not missing:
        return
    packages = " ".join(dict.fromkeys(p for _, p in missing))
    raise BuildNotFound(
        f"{spec}: the build needs {', '.join(h for h, _ in missing)}, which {compiler} does "
        f"not find; install them: apt-get install {packages} (`make {MAKE_TARGET[which]}` "
        "installs every package such a build needs)"
    )
