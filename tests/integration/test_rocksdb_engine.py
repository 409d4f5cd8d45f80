"""Real RocksDB libraries: fetched jars (before 6.24, 8.x, 10.x) and Debian's load, open a
database, and give the loadgen a connection that satisfies the step-spec schema.

The jars are 50-75 MB each; they are cached in ~/.m2 and in the build cache.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dbregress import provision
from dbregress.benchmarks import kv
from dbregress.engines.base import EngineOptions, Sizes
from dbregress.engines.rocksdb import RocksdbEngine
from dbregress.execution.step import collect_step
from dbregress.lab.file import KvSizes, Placement
from dbregress.loadgen.client import SPEC_VERSION, find_binary
from dbregress.model.errors import ConfigRejected
from dbregress.provision import Build, BuildSpec
from dbregress.provision.versioning import version_key

pytestmark = pytest.mark.engine

SCHEMA = json.loads((Path(__file__).parents[2] / "schema/step-spec.schema.json").read_text())
# before the bloom-bits change (6.24), 8.x with hyper clock, 10.x, and Debian's 7.8.3
VERSIONS = {"6.22.1": "6.22.1", "8.11.4": "8.11.4", "10.2.1": "10.2.1", "system": "7.8.3"}

# put a key, read it back, list a few symbols: the library works without a JVM
_SMOKE = r"""
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
vp, cp, n = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
perr, pn = ctypes.POINTER(cp), ctypes.POINTER(n)
for name, res, args in [
    ("rocksdb_options_create", vp, []),
    ("rocksdb_options_set_create_if_missing", None, [vp, ctypes.c_ubyte]),
    ("rocksdb_open", vp, [vp, cp, perr]),
    ("rocksdb_writeoptions_create", vp, []),
    ("rocksdb_readoptions_create", vp, []),
    ("rocksdb_close", None, [vp]),
    ("rocksdb_put", None, [vp, vp, cp, n, cp, n, perr]),
    ("rocksdb_get", vp, [vp, vp, cp, n, pn, perr]),
]:
    getattr(lib, name).restype = res
    getattr(lib, name).argtypes = args
opts = lib.rocksdb_options_create()
lib.rocksdb_options_set_create_if_missing(opts, 1)
err = cp()
db = lib.rocksdb_open(opts, sys.argv[2].encode(), ctypes.byref(err))
assert not err.value, err.value
lib.rocksdb_put(db, lib.rocksdb_writeoptions_create(), b"key", 3, b"value", 5, ctypes.byref(err))
size = ctypes.c_size_t()
reads = lib.rocksdb_readoptions_create()
value = lib.rocksdb_get(db, reads, b"key", 3, ctypes.byref(size), ctypes.byref(err))
got = ctypes.string_at(value, size.value).decode()
lib.rocksdb_close(db)
names = ["rocksdb_cache_create_hyper_clock", "rocksdb_block_based_options_set_block_align"]
print(json.dumps({"got": got, "has": [n for n in names if hasattr(lib, n)]}))
"""


@pytest.fixture(scope="module", params=list(VERSIONS))
def build(request: pytest.FixtureRequest) -> Build:
    if request.param == "system" and not list(
        Path("/usr/lib/x86_64-linux-gnu").glob("librocksdb.so.*")
    ):
        pytest.skip("no system RocksDB (apt-get install librocksdb7.8)")
    return provision.fetch(BuildSpec.parse(f"rocksdb@{request.param}"))


def engine(build: Build, root: Path, preset: str = "byrx", **settings: str) -> RocksdbEngine:
    options = EngineOptions(
        workdir=root / "work",
        log_path=root / "results" / "server.log",
        config_name=preset,
        settings=settings,
        sizes=Sizes(cache_mb=0, wal_mb=0, data_mb=KvSizes(keys=20_000).data_mb),
    )
    return RocksdbEngine(build, options)


def test_fetched_library_and_version(build: Build) -> None:
    assert build.library is not None and build.library.is_file()
    assert build.library_version == VERSIONS[str(build.spec.version)]
    if build.spec.version != "system":
        assert build.library.name == "librocksdbjni-linux64.so"
        assert build.identity["coordinates"] == f"org.rocksdb:rocksdbjni:{build.spec.version}"
        assert build.library.stat().st_mode & 0o777 == 0o755
    again = provision.fetch(build.spec)  # reused, not fetched again
    assert again.library == build.library and again.identity == build.identity


def test_library_opens_a_database_without_a_jvm(build: Build, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SMOKE, str(build.library), str(tmp_path / "db")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = json.loads(done.stdout)
    assert result["got"] == "value"
    hyper = "rocksdb_cache_create_hyper_clock" in result["has"]
    assert hyper == (version_key(build.library_version) >= (8, 1))  # what CAPABILITIES says


def test_connection_validates_for_every_kv_step(build: Build, tmp_path: Path) -> None:
    e = engine(build, tmp_path, "iobuf", sync="true")
    e.start()
    try:
        connection = e.connection()
        assert connection["library"] == str(build.library)
        assert connection["version"] == build.library_version
        for plan in kv.plan(KvSizes(keys=20_000, seconds=2, short_seconds=1)):
            spec: dict[str, Any] = kv.step_spec(connection, plan, 2, 1)
            jsonschema.validate({**spec, "spec_version": SPEC_VERSION}, SCHEMA)
    finally:
        e.stop()


def test_hyper_clock_by_version(build: Build, tmp_path: Path) -> None:
    e = engine(build, tmp_path, cache_type="hyper_clock")
    if version_key(build.library_version) >= (8, 1):
        assert e.connection()["options"]["cache_type"] == "hyper_clock"
    else:
        with pytest.raises(ConfigRejected, match=r"needs RocksDB 8\.1"):
            e.start()


@pytest.fixture(scope="module")
def kv_loadgen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The loadgen, if it knows the rocksdb driver and the kv workload (else skip)."""
    binary = find_binary()
    spec_path = tmp_path_factory.mktemp("kv-support") / "spec.json"
    spec = {
        "spec_version": SPEC_VERSION,
        "engine": {
            "driver": "rocksdb",
            "library": "/nonexistent/librocksdb.so",
            "version": "10.2.1",
            "db_path": str(spec_path.parent / "db"),
            "options": {},
        },
        "workload": {"kind": "kv", "step": "fillseq", "keys": 1},
        "clients": 1,
        "seed": 1,
    }
    spec_path.write_text(json.dumps(spec))
    done = subprocess.run(
        [str(binary), str(spec_path)], capture_output=True, text=True, timeout=60, check=False
    )
    if "unknown variant" in done.stdout + done.stderr:
        pytest.skip(f"{binary} predates the rocksdb driver and kv workload: `make build`")
    yield binary


def test_fillseq_and_readrandom_through_the_loadgen(
    build: Build, tmp_path: Path, kv_loadgen: Path
) -> None:
    sizes = KvSizes(keys=20_000, seconds=1, short_seconds=1, steps=("fillseq", "readrandom"))
    e = engine(build, tmp_path)
    e.start()
    results = tmp_path / "results"
    results.mkdir(exist_ok=True)
    try:
        for index, plan in enumerate(kv.plan(sizes), start=1):
            spec = kv.step_spec(e.connection(), plan, 2, index)
            outcome = collect_step(
                e,
                spec,
                results / f"{index:02d}-{plan.name}",
                plan,
                120.0,
                Placement("unpinned", None, None),
                lambda elapsed, left, rate: None,
            )
            result = outcome.result
            assert result["status"] == "ok", result
            assert result["q"]["count"] > 0 and result["q"]["value"] > 0
            if plan.name == "fillseq":
                assert result["q"]["count"] == sizes.keys
    finally:
        e.stop()
    assert e.data_size_bytes() > sizes.keys * sizes.value_size // 2  # the data is on disk
    assert (results / "server.log").read_text()  # RocksDB's LOG kept with the results
