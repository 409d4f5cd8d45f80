"""Imports point down: no cycle among src/dbregress's or loadgen/src's files."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import import_graph  # noqa: E402


def test_no_import_cycle() -> None:
    found = import_graph.all_cycles(ROOT)
    shown = [" <-> ".join(str(p.relative_to(ROOT)) for p in c) for c in found]
    assert not found, "import cycles (move the shared part below both): " + "; ".join(shown)


def test_a_cycle_is_found(tmp_path: Path) -> None:
    src = tmp_path / "src" / "pkg"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "a.py").write_text("from pkg import b\n")
    (src / "b.py").write_text("def f():\n    from pkg.a import x\n")
    rs = tmp_path / "loadgen" / "src"
    (rs / "driver").mkdir(parents=True)
    (rs / "main.rs").write_text("mod driver;\nmod spec;\nuse crate::spec::Spec;\n")
    (rs / "spec.rs").write_text("use crate::driver::x::Conn;\n")
    (rs / "driver" / "mod.rs").write_text("pub mod x;\n")
    (rs / "driver" / "x.rs").write_text(
        "use crate::spec::Spec;\n#[cfg(test)]\nmod tests {\n use crate::main;\n}\n"
    )
    found = [sorted(p.name for p in c) for c in import_graph.all_cycles(tmp_path)]
    assert sorted(found) == [["a.py", "b.py"], ["spec.rs", "x.rs"]]
