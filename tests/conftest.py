"""For every test: labs that do not set `count` get no cost lane (DBREGRESS_COUNT=0),
so the many small labs of the suite do not each spend minutes counting under valgrind.
The tests of the lane set `count = true` in their labs, which wins over this."""

from __future__ import annotations

import os

import pytest

os.environ["DBREGRESS_COUNT"] = "0"


# Files whose first test compiles an engine from source when the build cache and ccache
# are cold (a fresh machine): collected first, so that `pytest -n 2 --dist loadfile`
# hands them to a worker at once and the compile overlaps the rest of the suite instead
# of running alone at its end.
COMPILE_FIRST = ("tests/e2e/test_source_build.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def first(item: pytest.Item) -> int:
        path = item.nodeid.split("::")[0]
        return 0 if path in COMPILE_FIRST else 1

    items.sort(key=first)  # stable: every other test keeps its place
