"""The `[[column]]` tables of a lab file: label, build, config profile and settings,
checked when the lab loads so a mistake names the file, the line and the key."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from dbregress import configs
from dbregress.model.errors import BuildNotFound, ConfigRejected
from dbregress.model.tomlreader import TableReader, short, value_name
from dbregress.provision import BuildSpec

# labels and names become folder names: no '/', no leading '.', no whitespace
LABEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# settings are written to the engine's config file, one `key = value` line each
SETTING_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}")
CONTROL_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # any control character but tab


@dataclass(frozen=True)
class Column:
    """One (build, config) pair: one column of every report."""

    label: str
    build: BuildSpec
    config: str
    settings: dict[str, str] = field(default_factory=dict)
    # A self-test: the loadgen busy-waits this fraction of each operation's own latency
    # after it, so QPS falls by about F/(1+F) whatever the engine (docs/verdicts.md).
    inject_slowdown: float = 0.0


def check_label(r: TableReader, key: str, value: str, what: str = "") -> str:
    if not LABEL_RE.fullmatch(value):
        raise r.fail(
            key,
            f"{what}{short(value)} must be 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
        )
    return value


def read_columns(parent: TableReader, raw: list[Any]) -> tuple[Column, ...]:
    if not raw:
        raise parent.fail(
            "column", "a comparison needs at least one [[column]] (build, config) pair"
        )
    columns: list[Column] = []
    labels: set[str] = set()
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise parent.fail(
                "column",
                f"entry {i} is {value_name(item)}; write each column as a [[column]] "
                "table with a label and a build",
            )
        r = parent.child(f"column[{i}]", item)
        label = check_label(r, "label", r.require("label", str))
        if label in labels:
            raise r.fail("label", f"label {short(label)} is used twice; labels name report columns")
        labels.add(label)
        build = _build(r)
        config = _config(r, build)
        settings = _settings(r, build, config)
        inject = r.number("inject_slowdown", 0.0)
        if not 0 <= inject <= 10:
            raise r.fail("inject_slowdown", f"must be a fraction from 0 to 10, got {inject}")
        columns.append(Column(label, build, config, settings, inject))
        r.reject_unknown()
    return tuple(columns)


def _build(r: TableReader) -> BuildSpec:
    text: str = r.require("build", str)
    if CONTROL_RE.search(text) or "\t" in text:
        raise r.fail("build", f"{short(text)} has a control character; write ENGINE@VERSION")
    try:
        return BuildSpec.parse(text)
    except BuildNotFound as e:
        raise r.fail("build", str(e)) from e
    except (OSError, ValueError, RuntimeError) as e:  # a path that cannot be resolved
        raise r.fail("build", f"{short(text)}: the path cannot be resolved ({e})") from e


def _config(r: TableReader, build: BuildSpec) -> str:
    family = configs.family_of(build.engine)
    shipped = configs.profiles(family)
    config: str = r.get("config", str, "byrx" if family == "rocksdb" else "default")
    if config not in shipped:
        raise r.fail(
            "config",
            f"unknown {build.engine} config profile {short(config)}; shipped: {', '.join(shipped)} "
            "(docs/engines.md)",
        )
    return config


def _settings(r: TableReader, build: BuildSpec, config: str) -> dict[str, str]:
    settings: dict[str, str] = {}
    for key, value in r.get("settings", dict, {}).items():
        if not SETTING_KEY_RE.fullmatch(key):
            raise r.fail(
                "settings",
                f"setting name {short(key)} must be letters, digits, '_', '.' or '-', starting "
                "with a letter or '_'",
            )
        if not isinstance(value, (str, int, float)):
            raise r.fail(
                "settings", f"setting {short(key)} must be a string, a number or a boolean"
            )
        r.check_numbers("settings", value)
        if isinstance(value, str) and CONTROL_RE.search(value):
            raise r.fail(
                "settings",
                f"setting {short(key)} = {short(value)} has a line break or control character; "
                "a value must be one line",
            )
        settings[key] = _setting(value)
    if build.engine == "rocksdb":  # its options are typed: check them now, not at run time
        from dbregress.engines.rocksdb import parse_options

        for key, value in settings.items():
            try:
                parse_options({key: value}, config, "the lab's settings")
            except ConfigRejected as e:
                raise r.fail("settings", str(e)) from e
            except ArithmeticError as e:  # a number too large for a float
                raise r.fail("settings", f"setting {key!r} = {short(value)} is out of range") from e
    return settings


def _setting(value: str | int | float) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
