"""Shipped config profiles: `configs/<family>/<name>.conf`, sizes templated from the lab.

A profile is a settings file in the engine's own `key = value` syntax (`#` comments).
Values may use `{cache_mb}` and `{wal_mb}` (Python str.format fields, filled from the
lab's Sizes); no other braces are allowed. The lab's overrides replace profile keys.
"""

from __future__ import annotations

from pathlib import Path

from dbregress.engines.base import Sizes
from dbregress.errors import ConfigRejected

CONFIG_ROOT = Path(__file__).parent


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
        text = path.read_text().format(cache_mb=sizes.cache_mb, wal_mb=sizes.wal_mb)
        settings = parse_settings(text)
    except (KeyError, IndexError, ValueError) as e:
        raise ConfigRejected(f"config profile {path} is malformed: {e}") from e
    settings.update(overrides)
    return settings
