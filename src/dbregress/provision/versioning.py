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


def newest_in_series(series: str, available: list[str]) -> str | None:
    """The newest available release of `series` (`10.11` -> `10.11.9`), or None."""
    want = version_key(series)
    matching = [v for v in available if version_key(v)[: len(want)] == want]
    return max(matching, key=version_key) if matching else None


def closest(wanted: str, available: list[str], count: int = 12) -> list[str]:
    """The available versions nearest to `wanted`, in ascending version order.

    The releases of the same major, nearest first; if there are none, the newest
    releases of the nearest other majors (12.22 and 16.6 for a 14.1 that does not exist).
    """
    want = version_key(wanted) or (0,)
    newest_first = sorted(set(available), key=version_key, reverse=True)
    same_major = [v for v in newest_first if (version_key(v) or (0,))[0] == want[0]]
    if same_major:

        def distance(version: str) -> tuple[int, ...]:
            have = version_key(version)
            width = max(len(have), len(want))
            pad_have, pad_want = have + (0,) * width, want + (0,) * width
            return tuple(
                abs(a - b) for a, b in zip(pad_have[:width], pad_want[:width], strict=True)
            )

        return sort_versions(sorted(same_major, key=distance)[:count])
    rank: dict[str, tuple[int, int]] = {}
    seen: dict[int, int] = {}
    for version in newest_first:  # rank within its major, newest first
        major = (version_key(version) or (0,))[0]
        rank[version] = (seen.get(major, 0), abs(major - want[0]))
        seen[major] = rank[version][0] + 1
    return sort_versions(sorted(newest_first, key=rank.__getitem__)[: min(count, 5)])
