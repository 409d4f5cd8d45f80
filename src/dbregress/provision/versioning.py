"""Version strings as users write them and as registries list them.

Maven lists PostgreSQL builds as `17.2.0`, sometimes with a rebuild suffix (`10.11.0-1`);
users write `17.2`. Comparison is numeric, part by part, so 17.10.0 sorts after 17.9.0.
"""

from __future__ import annotations

import re

_PARTS = re.compile(r"\d+")


def version_key(version: str) -> tuple[int, ...]:
    """Numeric sort key: `10.11.0-1` -> (10, 11, 0, 1); non-numeric parts are ignored."""
    return tuple(int(part) for part in _PARTS.findall(version))


def sort_versions(versions: list[str]) -> list[str]:
    return sorted(set(versions), key=lambda v: (version_key(v), v))


def normalize(version: str) -> str:
    """`17.2` -> `17.2.0`; anything with three or more parts is kept as written."""
    text = version.strip()
    if re.fullmatch(r"\d+\.\d+", text):
        return text + ".0"
    return text


def closest(wanted: str, available: list[str], count: int = 5) -> list[str]:
    """The available versions nearest to `wanted`: same major first, then by distance.

    Returned in ascending version order so a message reads naturally.
    """
    want = version_key(wanted) or (0,)

    def distance(version: str) -> tuple[int, ...]:
        have = version_key(version) or (0,)
        same_major = 0 if have[0] == want[0] else 1
        width = max(len(have), len(want))
        padded_have = have + (0,) * (width - len(have))
        padded_want = want + (0,) * (width - len(want))
        return (same_major, *(abs(a - b) for a, b in zip(padded_have, padded_want, strict=True)))

    nearest = sorted(set(available), key=distance)[:count]
    return sort_versions(nearest)
