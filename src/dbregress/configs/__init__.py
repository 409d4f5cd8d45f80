"""Shipped config profiles: `configs/<family>/<name>.conf`, sizes templated from the lab.

A profile is a settings file in the engine's own `key = value` syntax (`#` comments).
Values may use `{cache_mb}`, `{wal_mb}` and `{data_mb}`, filled from the lab's Sizes (not
by str.format: no attribute or index fields); no other braces are allowed. A size may be
scaled, rounded up and bounded: `{data_mb:x1.5,min64}` is 1.5 times the data size in MB,
at least 64 (parts `xFACTOR`, `minMB`, `maxMB`, applied left to right). The lab's
overrides replace profile keys.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from dbregress.engines.base import Sizes
from dbregress.model.errors import ConfigRejected

CONFIG_ROOT = Path(__file__).parent
# the folder of profiles for each engine a build spec names
ENGINE_FAMILY = {
    "postgres": "postgres",
    "mariadb": "mysql",
    "mysql": "mysql",
    "rocksdb": "rocksdb",
    "null": "null",
}
SIZE_FIELD = re.compile(r"\{([^{}]*)\}")
SIZE_NAMES = ("cache_mb", "wal_mb", "data_mb")


class Megabytes(int):
    """A size in MB that a profile may scale: `{data_mb:x0.1,min8}`."""

    def __format__(self, spec: str) -> str:
        value = float(self)
        for part in filter(None, spec.split(",")):
            try:
                if part.startswith("x"):
                    value *= float(part[1:])
                elif part.startswith("min"):
                    value = max(value, float(part[3:]))
                elif part.startswith("max"):
                    value = min(value, float(part[3:]))
                else:
                    raise ValueError
                if not math.isfinite(value) or value < 0:
                    raise ValueError
            except ValueError:
                raise ValueError(
                    f"bad size format {spec!r}: expected parts xFACTOR, minMB, maxMB "
                    "(finite numbers, giving a size of 0 or more)"
                ) from None
        return str(math.ceil(value))


def profiles(family: str) -> list[str]:
    """The names of the profiles shipped for an engine family."""
    if family not in ENGINE_FAMILY.values():
        return []
    return sorted(p.stem for p in (CONFIG_ROOT / family).glob("*.conf"))


def family_of(engine: str) -> str:
    """The profile folder of an engine (`mariadb` -> `mysql`); the engine if unknown."""
    return ENGINE_FAMILY.get(engine, engine)


def parse_settings(text: str) -> dict[str, str]:
    """`key = value` lines (quotes stripped, `#` comments dropped) in file order."""
    settings: dict[str, str] = {}
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"line {number}: expected `key = value`, got {raw!r}")
        settings[key.strip()] = value.strip().strip("'")
    return settings


def render(family: str, name: str, sizes: Sizes, overrides: dict[str, str]) -> dict[str, str]:
    """The settings of profile `name` with sizes filled in and the overrides applied."""
    shipped = profiles(family)
    if name not in shipped:  # a name, never a path: `../x` must not reach another folder
        raise ConfigRejected(
            f"unknown {family} config profile {name!r}; shipped: {', '.join(shipped)}"
        )
    path = CONFIG_ROOT / family / f"{name}.conf"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigRejected(f"cannot read config profile {path}: {e}") from e
    settings = render_text(path, text, sizes)
    settings.update(overrides)
    return settings


def render_text(path: Path, text: str, sizes: Sizes) -> dict[str, str]:
    """The settings of a profile's text with its size fields filled in; ConfigRejected
    naming the file, the line and the key of anything malformed."""
    values = {"cache_mb": sizes.cache_mb, "wal_mb": sizes.wal_mb, "data_mb": sizes.data_mb}
    lines = []
    for number, line in enumerate(text.split("\n"), 1):
        code, hash_, comment = line.partition("#")  # comments may mention {fields}
        key = code.partition("=")[0].strip() or "(no key)"

        def fill(m: re.Match[str], number: int = number, key: str = key) -> str:
            name, _, spec = m.group(1).partition(":")
            if name not in SIZE_NAMES:
                raise _malformed(path, number, key, f"unknown size field {m.group(0)!r}")
            try:
                return format(Megabytes(values[name]), spec)
            except ValueError as e:
                raise _malformed(path, number, key, f"{m.group(0)}: {e}") from None

        code = SIZE_FIELD.sub(fill, code)
        if "{" in code or "}" in code:
            raise _malformed(path, number, key, "a brace that is not part of a size field")
        lines.append(code + hash_ + comment)
    try:
        return parse_settings("\n".join(lines))
    except ValueError as e:
        raise ConfigRejected(f"config profile {path} is malformed: {e}") from e


def _malformed(path: Path, number: int, key: str, problem: str) -> ConfigRejected:
    return ConfigRejected(
        f"config profile {path}:{number}: {key}: {problem}; the size fields are "
        "{cache_mb}, {wal_mb} and {data_mb}, optionally scaled like {data_mb:x1.5,min64}"
    )
