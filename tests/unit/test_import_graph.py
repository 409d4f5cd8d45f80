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


def test_the_package_holds_packages_only_each_in_one_layer() -> None:
    """`ls src/dbregress` lists packages only (and __init__.py, py.typed), and LAYERS
    names each of them once."""
    src = ROOT / "src" / "dbregress"
    loose = sorted(
        p.name for p in src.iterdir() if p.is_file() and p.name not in ("__init__.py", "py.typed")
    )
    assert loose == [], f"modules outside a package: {loose}"
    packages = {p.name for p in src.iterdir() if (p / "__init__.py").is_file()}
    named = [u for _, units in import_graph.LAYERS for u in units if u != "__init__"]
    assert sorted(named) == sorted(packages) and len(named) == len(set(named))


def test_the_architecture_doc_draws_the_tree_one_to_one() -> None:
    """docs/architecture.md: its layer table is LAYERS, and its drawing of src/dbregress
    names every package once, top layer first."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    table = doc[doc.index("| layer | packages |") :].split("\n\n")[0].splitlines()[2:]
    rows = [
        (cells[1].strip(), tuple(x.strip(" `") for x in cells[2].split(",")))
        for cells in (r.split("|") for r in table)
    ]
    layers = [
        (name, tuple(u for u in units if u != "__init__")) for name, units in import_graph.LAYERS
    ]
    assert [(n, sorted(u)) for n, u in rows] == [(n, sorted(u)) for n, u in layers]
    drawing = doc[doc.index("src/dbregress/   (packages only") : doc.index("loadgen/src/ ")]
    drawn = [
        line.split("/")[0].strip()
        for line in drawing.splitlines()
        if line.startswith("  ") and not line.startswith("   ") and "/" in line.split()[0]
    ]
    order = [u for _, units in layers for u in units]
    assert sorted(drawn) == sorted(order)
    layer_of = {u: i for i, (_, units) in enumerate(layers) for u in units}
    assert [layer_of[d] for d in drawn] == sorted(layer_of[d] for d in drawn)
