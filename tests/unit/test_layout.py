"""The lab key `aslr`: children of dbregress get a fixed or a randomized layout."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from dbregress.collect import layout
from dbregress.errors import LabError
from dbregress.lab import parse_lab


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


def test_lab_key() -> None:
    path = Path("x.toml")
    assert parse_lab(_toml(_lab("")), path, _lab("")).aslr is True
    text = _lab("aslr = false\n")
    assert parse_lab(_toml(text), path, text).aslr is False
    text = _lab('aslr = "off"\n')
    with pytest.raises(LabError, match="aslr"):
        parse_lab(_toml(text), path, text)


def _toml(text: str) -> dict[str, Any]:
    return tomllib.loads(text)
