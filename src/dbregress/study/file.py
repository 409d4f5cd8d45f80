"""A study file (labs/studies/NAME.toml, docs/studies.md): which seed report it
reproduces, its lab file, the params a user supplies, its scales and the seed's
published figures as claims. Every mistake is a LabError naming the file, the line and
the key to fix; a claim is checked against the lab it names (its comparison, step and
columns must be there)."""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbregress import benchmarks
from dbregress.analysis.cost_methods import COST_METRICS
from dbregress.lab.file import Comparison, Lab, parse_lab
from dbregress.model.errors import LabError
from dbregress.model.tomlreader import TableReader, TomlTable, read_toml, short, value_name
from dbregress.study import render

STUDIES = Path("labs") / "studies"  # where `dbregress study` looks, from the working directory
LAB_SUFFIX = ".lab.toml"
METRICS = ("qps", *(m.key for m in COST_METRICS))
DIRECTIONS = ("faster", "slower", "same")
# |seed_ratio - 1| at the threshold counts as reaching it (1.05 - 1 is 0.05000000000000004)
EPSILON = 1e-9


@dataclass(frozen=True)
class Claim:
    """One published figure: `column` over `base` on `step` of `comparison`, as
    `seed_ratio` (column / base) or only a `direction`."""

    number: int  # 1-based, in the study file's order
    comparison: str
    step: str
    base: str
    column: str
    metric: str  # "qps" (the time lane) or a cost metric as verdicts.json names it
    seed_ratio: float | None
    direction: str | None  # faster | slower | same
    where: str
    said: str
    why_may_differ: str | None = None

    @property
    def lane(self) -> str:
        return "time" if self.metric == "qps" else "cost"

    def expected(self, threshold: float) -> str | None:
        """The verdict word the seed's figure calls for in our lane, `faster` or `slower`
        (in the cost lane `slower` is more work per operation, a ratio above 1); None
        when the seed reports no change of `threshold` or more (listed apart)."""
        if self.seed_ratio is not None:
            if abs(self.seed_ratio - 1) < threshold - EPSILON:
                return None
            up = self.seed_ratio > 1
            return ("faster" if up else "slower") if self.lane == "time" else _cost_word(up)
        return self.direction if self.direction in ("faster", "slower") else None

    def expects_above_one(self, threshold: float) -> bool | None:
        """Whether the seed's figure puts our ratio above 1 (None: no change claimed)."""
        word = self.expected(threshold)
        if word is None:
            return None
        return (word == "faster") == (self.lane == "time")


def _cost_word(more_work: bool) -> str:
    return "slower" if more_work else "faster"


@dataclass(frozen=True)
class Study:
    path: Path
    name: str
    title: str
    seed: str
    source: str
    lab_path: Path
    page: Path  # relative to the working directory the command runs in
    threshold: float
    runnable: bool
    needs: str | None  # what the user must supply when the study cannot run here
    differences: tuple[str, ...]
    params: dict[str, str]  # name -> what it is
    scales: dict[str, dict[str, TomlTable]]  # scale -> section or comparison -> sizes
    claims: tuple[Claim, ...]
    lab_text: str
    lab_data: TomlTable
    lab: Lab  # the lab as written, each placeholder standing in for its param

    def comparison(self, name: str) -> Comparison | None:
        return next((c for c in self.lab.comparisons if c.name == name), None)

    @property
    def scale_names(self) -> list[str]:
        return list(dict.fromkeys(["small", *self.scales]))

    def template_at(self, scale: str) -> Lab:
        """The lab as written at a scale, each placeholder standing in for its param."""
        merged = render.merge_scale(self.lab_data, self.scales.get(scale, {}))
        return render.template_lab(self.lab_path, render.toml_text(merged), merged, self.params)

    def rendered(self, values: Mapping[str, str], scale: str = "small") -> render.Rendered:
        """The lab as it runs with these param values at this scale ("small": the lab
        as written, with the study's [scale.small] merged if it has one)."""
        if scale not in self.scale_names:
            raise LabError(
                f"{self.path}: study {self.name} has no [scale.{scale}] "
                f"(its scales: {', '.join(self.scale_names)})"
            )
        head = (
            f"{self.lab_path.name} as `dbregress study run {self.name} --scale {scale}` ran it: "
            f"the params put in, [scale.{scale}] of {self.path.name} merged over its sizes "
            f"(the lab file's comments are in {self.lab_path.name})"
        )
        text = render.lab_text(
            self.lab_text, self.lab_data, values, self.scales.get(scale, {}), head
        )
        try:
            lab = parse_lab(tomllib.loads(text), self.lab_path, text)
        except LabError as e:
            raise LabError(f"{e} (the lab of study {self.name} at scale {scale})") from None
        return render.Rendered(text, lab, scale, dict(values))


def study_files(folder: Path) -> list[Path]:
    """The study files of a folder (its lab files left out), by name."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.toml") if not p.name.endswith(LAB_SUFFIX))


def find_study(name: str, folder: Path = STUDIES) -> Path:
    """A study by name (its file under `folder`) or by the path of its file."""
    given = Path(name)
    if given.suffix == ".toml" and given.is_file():
        return given
    path = folder / f"{name}.toml"
    if path.is_file() and not path.name.endswith(LAB_SUFFIX):
        return path
    known = ", ".join(p.stem for p in study_files(folder)) or "none"
    raise LabError(f"no study {short(name)} in {folder} (its studies: {known})")


def load_study(path: Path) -> Study:
    """The study in a TOML file, checked key by key and against its lab."""
    text, data = read_toml(path, "study file")
    top = TableReader(path, text, "", data)
    r = top.child("study", top.require("study", dict))
    name = r.require("name", str)
    if name != path.stem:
        raise r.fail("name", f"must be the file's stem {path.stem!r}, got {short(name)}")
    title, seed, source = (r.require(k, str) for k in ("title", "seed", "source"))
    lab_path = path.parent / r.require("lab", str)
    if not lab_path.is_file():
        raise r.fail("lab", f"no lab file {lab_path} (the path is relative to the study file)")
    params = _params(r)
    threshold = r.number("threshold", 0.05, low=0, low_open=True, high=1)
    runnable = r.get("runnable", bool, True)
    needs = r.get("needs", str, None)
    differences = tuple(_strings(r, "differences"))
    page = Path(r.get("page", str, f"docs/studies/{name}.md"))
    r.reject_unknown()
    lab_text, lab_data = read_toml(lab_path)
    render.check_placeholders(lab_path, lab_text, lab_data, params)
    lab = render.template_lab(lab_path, lab_text, lab_data, params)
    scales = _scales(top, lab_path, lab_text, lab_data, params)
    raw = top.get("claim", list, [])
    claims = tuple(_claim(top, i, item, lab, threshold) for i, item in enumerate(raw))
    top.reject_unknown()
    return Study(
        path=path,
        name=name,
        title=title,
        seed=seed,
        source=source,
        lab_path=lab_path,
        page=page,
        threshold=threshold,
        runnable=runnable,
        needs=needs,
        differences=differences,
        params=params,
        scales=scales,
        claims=claims,
        lab_text=lab_text,
        lab_data=lab_data,
        lab=lab,
    )


def _strings(r: TableReader, key: str) -> list[str]:
    values: list[Any] = r.get(key, list, [])
    for value in values:
        if not isinstance(value, str):
            raise r.fail(key, f"expected a list of strings, got {value_name(value)} in it")
    return values


def _params(r: TableReader) -> dict[str, str]:
    p = r.child("params", r.get("params", dict, {}))
    params: dict[str, str] = {}
    for name in p.data:
        if not render.PARAM_NAME.fullmatch(name):
            raise p.fail(
                name, "a param's name is letters, digits and '_', not starting with a digit"
            )
        params[name] = p.require(name, str)
    return params


def _scales(
    top: TableReader,
    lab_path: Path,
    lab_text: str,
    lab_data: TomlTable,
    params: dict[str, str],
) -> dict[str, dict[str, TomlTable]]:
    """[scale.NAME] tables: per benchmark section (every comparison of that benchmark)
    or comparison name, the sizes merged over its section; each checked by loading the
    lab as merged."""
    raw = top.child("scale", top.get("scale", dict, {}))
    scales: dict[str, dict[str, TomlTable]] = {}
    for scale in raw.data:
        r = raw.child(scale, raw.get(scale, dict))
        known = render.scale_targets(lab_data)
        for key in r.data:
            if key not in known:
                raise _fail(
                    r,
                    key,
                    f"{short(key)} is neither a benchmark section nor a comparison of "
                    f"{lab_path.name} (these are: {', '.join(known)})",
                )
            if not isinstance(r.data[key], dict):
                raise _fail(r, key, f"expected a table of sizes, got {value_name(r.data[key])}")
            both = render.ambiguous(lab_data, key)
            if both:
                raise _fail(
                    r,
                    key,
                    f"{short(key)} names both a benchmark section (of {both}) and a "
                    "comparison: it would be merged into each; rename the comparison",
                )
        scales[scale] = r.data
        try:
            merged = render.merge_scale(lab_data, r.data)
            render.template_lab(lab_path, render.toml_text(merged), merged, params)
        except LabError as e:
            said = str(e).split(": ", 1)[-1] if str(e).startswith(str(lab_path)) else str(e)
            raise _fail(r, None, f"merged over {lab_path.name}, it is refused: {said}") from None
    return scales


def _fail(r: TableReader, key: str | None, message: str) -> LabError:
    """An error in a [scale.NAME] table, at its line: the reader finds no line for a
    table whose parent, [scale], is not written as a table of its own."""
    lines = r.text.split("\n")
    header = re.compile(rf"^\s*\[\s*{re.escape(r.table)}\s*\]")
    start = next((i for i, ln in enumerate(lines) if header.match(ln)), None)
    line = 1 if start is None else start + 1
    if start is not None and key is not None:
        assigned = re.compile(rf"^\s*{re.escape(key)}\s*=")
        for i in range(start + 1, len(lines)):
            if lines[i].lstrip().startswith("["):
                break
            if assigned.match(lines[i]):
                line = i + 1
                break
    dotted = ".".join(p for p in (r.table, key) if p)
    return LabError(f"{r.path}:{line}: {dotted}: {message}")


def _claim(top: TableReader, index: int, item: Any, lab: Lab, threshold: float) -> Claim:
    if not isinstance(item, dict):
        raise top.fail("claim", f"entry {index} is {value_name(item)}; write a [[claim]] table")
    r = top.child(f"claim[{index}]", item)
    comps = {c.name: c for c in lab.comparisons}
    name = r.require("comparison", str)
    comp = comps.get(name)
    if comp is None:
        raise r.fail("comparison", f"no comparison {short(name)} in the lab ({', '.join(comps)})")
    steps = [p.name for p in benchmarks.plans(comp) if p.reported]
    step = r.require("step", str)
    if step not in steps:
        raise r.fail("step", f"{short(step)} is not a reported step of {name} ({', '.join(steps)})")
    labels = [c.label for c in comp.columns]
    base, column = r.require("base", str), r.require("column", str)
    for key, label in (("base", base), ("column", column)):
        if label not in labels:
            raise r.fail(key, f"no column {short(label)} in {name} ({', '.join(labels)})")
    if base != labels[0]:
        raise r.fail(
            "base",
            f"{base} is not the base of {name} ({labels[0]}): our verdicts are against a "
            "comparison's first column; set the claim on a comparison whose first column is it",
        )
    if column == base:
        raise r.fail("column", "the column is the base itself; name another column")
    metric = r.get("metric", str, "qps")
    if metric not in METRICS:
        raise r.fail("metric", f"unknown metric {short(metric)}; known: {', '.join(METRICS)}")
    seed_ratio = r.number("seed_ratio", None, low=0, low_open=True, high=1000)
    direction = r.get("direction", str, None)
    if direction is not None and direction not in DIRECTIONS:
        raise r.fail("direction", f"must be one of {', '.join(DIRECTIONS)}, got {short(direction)}")
    claim = Claim(
        number=index + 1,
        comparison=name,
        step=step,
        base=base,
        column=column,
        metric=metric,
        seed_ratio=seed_ratio,
        direction=direction,
        where=r.require("where", str),
        said=r.require("said", str),
        why_may_differ=r.get("why_may_differ", str, None),
    )
    _check_direction(r, claim, threshold)
    r.reject_unknown()
    return claim


def _check_direction(r: TableReader, claim: Claim, threshold: float) -> None:
    """A claim gives its figure, its direction or both; both must say the same."""
    ratio, direction = claim.seed_ratio, claim.direction
    if ratio is None and direction is None:
        raise r.fail(None, "give seed_ratio (the figure as column/base), direction, or both")
    if ratio is None or direction is None:
        return
    word = claim.expected(threshold)
    if direction == "same" and word is not None:
        raise r.fail("direction", f"'same', but seed_ratio {ratio:g} is beyond the threshold")
    if direction == "same":
        return
    if math.isclose(ratio, 1.0):
        raise r.fail("direction", f"{direction!r}, but seed_ratio {ratio:g} says no change")
    up = ratio > 1
    said = ("faster" if up else "slower") if claim.lane == "time" else _cost_word(up)
    if said != direction:
        raise r.fail("direction", f"{direction!r}, but seed_ratio {ratio:g} says {said}")
