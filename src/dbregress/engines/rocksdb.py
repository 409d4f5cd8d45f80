"""RocksDB, embedded: no server, a private database directory the loadgen opens itself.

The engine's job is what must be right before the loadgen runs: a writable directory
with room, and options that this build can honour. A preset (configs/rocksdb/*.conf:
byrx, iobuf, iodir) sized from the data gives the options; the lab's settings override
them; every value is parsed to the step spec's type (schema/step-spec.schema.json,
engine `rocksdb`, `options`) and checked against the build's version, so a setting the
library lacks is refused here with its name, not deep inside the loadgen.
"""

from __future__ import annotations

import errno
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from dbregress import configs
from dbregress.engines.base import Engine, EngineOptions, ReadPattern
from dbregress.model import spec_schema
from dbregress.model.errors import ConfigRejected, EngineError
from dbregress.provision import Build
from dbregress.provision.versioning import version_key
from dbregress.shapes.spec import EngineSpec, RocksDbOptions

TRUE_WORDS = ("true", "on", "yes", "1")
FALSE_WORDS = ("false", "off", "no", "0")
SPARE_MB = 64  # room beyond twice the data: WAL, memtables, compaction output


@dataclass(frozen=True)
class Option:
    """One key of the spec's `options` object: its JSON type and bounds."""

    kind: str  # "bool", "int", "number" or "enum"
    minimum: float | None = None
    choices: tuple[str, ...] = ()

    def allowed(self) -> str:
        if self.kind == "bool":
            return "true or false"
        if self.kind == "enum":
            return ", ".join(self.choices)
        noun = "an integer" if self.kind == "int" else "a number"
        return f"{noun} >= {self.minimum:g}" if self.minimum is not None else noun

    def parse(self, text: str) -> bool | int | float | str:
        """The typed value of `text`; ValueError if it is not allowed."""
        word = text.strip().lower()
        if self.kind == "bool":
            if word not in TRUE_WORDS + FALSE_WORDS:
                raise ValueError
            return word in TRUE_WORDS
        if self.kind == "enum":
            if word not in self.choices:
                raise ValueError
            return word
        number = float(word) if self.kind == "number" else int(word)
        if not math.isfinite(number) or (self.minimum is not None and number < self.minimum):
            raise ValueError
        return int(number) if float(number).is_integer() else number


def _option(prop: spec_schema.Property) -> Option:
    """An option's type and bounds as the step-spec schema states them."""
    if "enum" in prop:
        return Option("enum", choices=tuple(prop["enum"]))
    kind = {"boolean": "bool", "integer": "int", "number": "number"}[prop["type"]]
    return Option(kind, prop.get("minimum"))


# The options a config may set: those of the spec's rocksdb engine, with its types and
# bounds (schema/step-spec.schema.json, generated from the loadgen's types).
OPTIONS: dict[str, Option] = {
    key: _option(prop) for key, prop in spec_schema.engine_options("rocksdb").items()
}

# (option, value that needs it, oldest RocksDB that has it)
CAPABILITIES: tuple[tuple[str, str | bool, tuple[int, int]], ...] = (
    ("cache_type", "hyper_clock", (8, 1)),
    ("cache_type", "auto_hyper_clock", (8, 7)),
    ("block_align", True, (11, 0)),
)
FRACTIONAL_BLOOM_SINCE = (6, 24)  # bits per key was an int in the C API before


def parse_options(raw: dict[str, str], preset: str, source: str) -> RocksDbOptions:
    """Typed options; ConfigRejected naming the key, the preset and the allowed values."""
    typed: dict[str, bool | int | float | str] = {}
    for key, text in raw.items():
        option = OPTIONS.get(key)
        if option is None:
            raise ConfigRejected(
                f"unknown rocksdb option {key!r} in {source} (preset {preset!r}); "
                f"known: {', '.join(OPTIONS)}"
            )
        try:
            typed[key] = option.parse(text)
        except ValueError:
            raise ConfigRejected(
                f"rocksdb option {key} = {text!r} in {source} (preset {preset!r}) is not "
                f"allowed; allowed: {option.allowed()}"
            ) from None
    # each key is one of the schema's options, its value parsed to the option's type
    return cast(RocksDbOptions, typed)


def check_capabilities(options: RocksDbOptions, version: str, what: str) -> None:
    """Refuse options this RocksDB version lacks, before the loadgen ever loads it."""
    have = version_key(version)
    for key, value, since in CAPABILITIES:
        if options.get(key) == value and have < since:
            shown = str(value).lower() if isinstance(value, bool) else value
            raise ConfigRejected(
                f"{what}: {key} = {shown} needs RocksDB {since[0]}.{since[1]} or newer; "
                f"this build is RocksDB {version}"
            )
    bloom = options.get("bloom_bits")
    if isinstance(bloom, float) and have < FRACTIONAL_BLOOM_SINCE:
        raise ConfigRejected(
            f"{what}: bloom_bits = {bloom} is fractional, which needs RocksDB 6.24 or newer "
            f"(before, bits per key is an integer); this build is RocksDB {version}"
        )
    if "estimated_entry_charge" in options and options.get("cache_type") != "hyper_clock":
        raise ConfigRejected(
            f"{what}: estimated_entry_charge applies only to cache_type = hyper_clock"
        )


def _bool_text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


class RocksdbEngine(Engine):
    """One RocksDB database in `options.workdir`/db, opened by the loadgen at each step."""

    embedded = True

    def __init__(self, build: Build, options: EngineOptions) -> None:
        super().__init__(build, options)
        if build.library is None or not build.library_version:
            raise EngineError(f"{build.spec} is not a RocksDB library build")
        self.library: Path = build.library
        self.version: str = build.library_version
        self._options: RocksDbOptions | None = None

    @property
    def db_dir(self) -> Path:
        return self.options.workdir / "db"

    # -- options ------------------------------------------------------------------------

    def rocksdb_options(self) -> RocksDbOptions:
        """The preset sized from the data, then the lab's settings; typed and checked."""
        if self._options is None:
            preset = self.options.config_name
            base = configs.render("rocksdb", preset, self.options.sizes, {})
            options = parse_options(base, preset, f"configs/rocksdb/{preset}.conf")
            options |= parse_options(self.options.settings, preset, "the lab's settings")
            what = f"{self.build.spec} with preset {preset!r}"
            check_capabilities(options, self.version, what)
            self._options = options
        return self._options.copy()

    def settings_applied(self) -> dict[str, str]:
        return {key: _bool_text(value) for key, value in self.rocksdb_options().items()}

    def read_pattern(self) -> ReadPattern:
        """A data block per read, with O_DIRECT when direct_io is on; a preset without
        block_size gets the loadgen's default (its spec schema's)."""
        options = self.rocksdb_options()
        default = spec_schema.default(spec_schema.engine_options("rocksdb"), "block_size")
        size = int(options.get("block_size", default))
        return ReadPattern(size, bool(options.get("direct_io")), "RocksDB's block_size")

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        options = self.rocksdb_options()  # refused settings fail before anything is created
        workdir = self.options.workdir
        if workdir.exists() and any(workdir.iterdir()):
            raise EngineError(f"{self.build.spec}: workdir {workdir} is not empty; give a new one")
        try:
            workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.db_dir.mkdir(mode=0o700)
        except OSError as e:
            raise EngineError(f"{self.build.spec}: cannot create {self.db_dir}: {e}") from e
        self._check_writable(direct=bool(options.get("direct_io")))
        self._check_room(options)

    def _check_writable(self, direct: bool) -> None:
        """Write a probe file (with O_DIRECT when direct_io is on, which tmpfs refuses)."""
        probe = self.db_dir / ".dbregress-probe"
        flags = os.O_CREAT | os.O_WRONLY | os.O_TRUNC | (os.O_DIRECT if direct else 0)
        try:
            fd = os.open(probe, flags, 0o600)
            os.close(fd)
            probe.unlink()
        except OSError as e:
            if direct and e.errno == errno.EINVAL:
                raise ConfigRejected(
                    f"{self.build.spec}: direct_io = true (preset "
                    f"{self.options.config_name!r}) but the filesystem of {self.db_dir} does "
                    "not support O_DIRECT (tmpfs?); use a disk-backed DBREGRESS_WORKDIR or "
                    "the iobuf preset"
                ) from e
            raise EngineError(
                f"{self.build.spec}: the database directory {self.db_dir} is not writable: "
                f"{e.strerror}; give a writable DBREGRESS_WORKDIR"
            ) from e

    def _check_room(self, options: RocksDbOptions) -> None:
        need_mb = 2 * self.options.sizes.data_mb + 2 * int(options.get("write_buffer_mb", 64))
        need_mb += SPARE_MB
        stat = os.statvfs(self.db_dir)
        free_mb = stat.f_bavail * stat.f_frsize // 2**20
        if free_mb < need_mb:
            raise EngineError(
                f"{self.build.spec}: {self.db_dir} has {free_mb} MB free but the benchmark "
                f"needs about {need_mb} MB (twice its {self.options.sizes.data_mb} MB of data, "
                "plus memtables); free some space or use a larger DBREGRESS_WORKDIR"
            )

    def stop(self) -> None:
        """Nothing runs between steps; keep RocksDB's own LOG with the run's results."""
        log = self.db_dir / "LOG"
        if log.is_file():
            try:
                self.options.log_path.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(log, self.options.log_path)
            except OSError:
                pass  # the results keep going without it

    def check_alive(self) -> None:
        """Nothing to check: the loadgen, which holds the database, reports its own end."""

    def server_pid(self) -> int:
        raise EngineError(
            f"{self.build.spec} is embedded: the loadgen's process is the one measured"
        )

    def connection(self) -> EngineSpec:
        return {
            "driver": "rocksdb",
            "library": str(self.library),
            "version": self.version,
            "db_path": str(self.db_dir),
            "options": self.rocksdb_options(),
        }

    def data_size_bytes(self) -> int:
        total = 0
        for dirpath, _, filenames in os.walk(self.db_dir):
            for name in filenames:
                try:
                    total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
                except FileNotFoundError:  # removed by a compaction meanwhile
                    continue
        return total

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = (self.db_dir / "LOG").read_text(errors="replace")
        except OSError:
            return super().log_tail(lines)
        return "\n".join(text.splitlines()[-lines:])
