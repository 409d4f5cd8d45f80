"""The house's size limits hold (tools/sizes.py, in make lint and make test): no module
over 500 lines, no class over 250 and no function over 60 in src/dbregress."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import sizes  # noqa: E402


def test_no_module_class_or_function_is_too_long() -> None:
    assert sizes.too_long(ROOT / "src" / "dbregress") == []


def test_the_tool_finds_a_long_function_and_a_long_class(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n")
    methods = "\n".join(f"    def m{i}(self):\n        return {i}\n" for i in range(84))
    (tmp_path / "big.py").write_text(f"class Big:\n{methods}")
    (tmp_path / "short.py").write_text("def short():\n    return 1\n")
    (tmp_path / "many.py").write_text("x = 1\n" * 501)
    found = sizes.too_long(tmp_path)
    assert [(where.split(" ")[-1], lines, limit) for where, lines, limit in found] == [
        ("(module)", 501, 500),
        ("Big", 252, 250),
        ("long", 62, 60),
    ]
