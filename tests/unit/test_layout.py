"""The lab keys `aslr` (children of dbregress get a fixed or a randomized layout) and
`explain`."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from dbregress.collect import layout
from dbregress.lab.file import parse_lab
from dbregress.model.errors import LabError


def _heap() -> str:
    maps = subprocess.run(["cat", "/proc/self/maps"], capture_output=True, text=True).stdout
    return next(line.split()[0] for line in maps.splitlines() if "[heap]" in line)


def test_children_share_one_layout_only_without_randomization() -> None:
    if (Path("/proc/sys/kernel/randomize_va_space").read_text().strip()) == "0":
        pytest.skip("the kernel does not randomize layouts on this host")
    try:
        layout.set_randomization(False)
        assert layout.state() == "off"
        assert len({_heap() for _ in range(4)}) == 1
        layout.set_randomization(True)
        assert layout.state() == "on"
        assert len({_heap() for _ in range(4)}) > 1
    finally:
        layout.set_randomization(True)


def _lab(extra: str) -> str:
    column = '[[column]]\nlabel = "a"\nbuild = "postgres@17.2.0"\nconfig = "default"\n'
    return f'name = "x"\n{extra}{column}'


@pytest.mark.parametrize(("key", "default"), [("aslr", True), ("explain", False)])
def test_lab_key(key: str, default: bool) -> None:
    """`explain = true` asks for an explain run after the lab (tests/e2e/test_explain.py)."""
    path = Path("x.toml")
    assert getattr(parse_lab(_toml(_lab("")), path, _lab("")), key) is default
    text = _lab(f"{key} = {str(not default).lower()}\n")
    assert getattr(parse_lab(_toml(text), path, text), key) is not default
    text = _lab(f'{key} = "off"\n')
    with pytest.raises(LabError, match=key):
        parse_lab(_toml(text), path, text)


def _toml(text: str) -> dict[str, Any]:
    return tomllib.loads(text)


def test_explain_true_accepts_every_engine_family() -> None:
    import shutil

    from dbregress.explain.explainer import require_explainable

    if shutil.which("valgrind") is None:
        pytest.skip("needs valgrind (make debian)")
    # MariaDB is counted by connection thread (explain/threads.py) since the cost lane
    column = '[[column]]\nlabel = "m"\nbuild = "mariadb@11.4.5"\nconfig = "default"\n'
    text = f'name = "x"\nexplain = true\n{column}'
    require_explainable(parse_lab(_toml(text), Path("x.toml"), text))
