"""Shipped config profiles: `configs/<family>/<name>.conf`, sizes templated from the lab.

A profile is a settings file in the engine's own `key = value` syntax (`#` comments).
Values may use `{cache_mb}`, `{wal_mb}` and `{data_mb}` (Python str.format fields, filled
from the lab's Sizes); no other braces are allowed. A size may be scaled, rounded up and
bounded: `{data_mb:x1.5,min64}` is 1.5 times the data size in MB, at least 64 (parts
`xFACTOR`, `minMB`, `maxMB`, applied left to right). The lab's overrides replace
profile keys.
"""

from __future__ import annotations

import math
from pathlib import Path

from dbregress.engines.base import Sizes
from dbregress.errors import ConfigRejected

CONFIG_ROOT = Path(__file__).parent


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
            except ValueError:
                raise ValueError(
                    f"bad size format {spec!r}: expected parts xFACTOR, minMB, maxMB"
                ) from None
        return str(math.ceil(value))


def profiles(family: str) -> list[str]:
    """The names of the profiles shipped for an engine family."""
    return sorted(p.stem for p in (CONFIG_ROOT / family).glob("*.conf"))


def parse_settings(text: str) -> dict[str, str]:
    """`key = value` lines (quotes stripped, `#` comments dropped) in file order."""
    settings: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
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
    path = CONFIG_ROOT / family / f"{name}.conf"
    if not path.is_file():
        raise ConfigRejected(
            f"unknown {family} config profile {name!r}; shipped: {', '.join(profiles(family))}"
        )
    try:
        text = path.read_text().format(
            cache_mb=Megabytes(sizes.cache_mb),
            wal_mb=Megabytes(sizes.wal_mb),
            data_mb=Megabytes(sizes.data_mb),
        )
        settings = parse_settings(text)
    except (KeyError, IndexError, ValueError) as e:
        raise ConfigRejected(f"config profile {path} is malformed: {e}") from e
    settings.update(overrides)
    return settings
