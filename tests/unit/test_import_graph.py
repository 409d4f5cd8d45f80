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


def test_the_layers_hold() -> None:
    """No import goes up a layer of tools/import_graph.py's LAYERS (imports inside
    functions included), every unit is in a layer, and no packages import each other
    round a cycle."""
    up, unknown, between = import_graph.layer_problems(ROOT)
    assert not up, "upward imports (move the shared part down): " + "; ".join(up)
    assert not unknown, f"units in no layer (add them to LAYERS): {unknown}"
    assert not between, f"cycles between packages: {between}"


def test_an_upward_import_and_a_cycle_between_packages_are_found(tmp_path: Path) -> None:
    pkg = tmp_path / "src" / "dbregress"
    for sub in ("top", "low", "left", "right"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "top" / "a.py").write_text("from dbregress.low import b\n")
    (pkg / "low" / "b.py").write_text("def f():\n    from dbregress.top.a import x\n")
    (pkg / "left" / "c.py").write_text("from dbregress.right import d\n")
    (pkg / "right" / "d.py").write_text("from dbregress.left.e import y\n")
    (pkg / "left" / "e.py").write_text("")
    (pkg / "stray.py").write_text("")
    layers = (("top", ("top",)), ("middle", ("left", "right")), ("low", ("low", "__init__")))
    up, unknown, between = import_graph.layer_problems(tmp_path, layers)
    assert up == ["src/dbregress/low/b.py -> src/dbregress/top/a.py"]
    assert unknown == ["stray"]
    assert sorted(between) == [["left", "right"], ["low", "top"]]  # the upward one too
