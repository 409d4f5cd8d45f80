"""A stopped bisection resumes from its bisect.json: measured points are reused, the
interrupted point's run is resumed, and the path ends where an uninterrupted one does
(simulated levels: no engines)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dbregress import bisect
from dbregress.bisect import BisectError, Bisection, BisectPoint, BisectRequest, Verdict, load_state
from tests.unit.test_bisect_rule import word

LEVELS = [100.0] * 11 + [110.0] * 6  # the first bad build is the 12th of 17


class Stop(Exception):
    pass


def patched(monkeypatch: pytest.MonkeyPatch, stop_at: int | None, log: list[Any]) -> None:
    builds = [f"rocksdb@1.{i}.0" for i in range(len(LEVELS))]
    level = dict(zip(builds, LEVELS, strict=True))

    def measure(self: Bisection, lo: str, mid: str, hi: str, attempt: int) -> BisectPoint:
        resumed = self.current is not None and self.current.get("mid") == mid
        self.current = {"lo": lo, "mid": mid, "hi": hi, "attempt": attempt, "run": f"r-{mid}"}
        self._save()
        log.append((mid, resumed))
        if stop_at is not None and len(log) == stop_at:
            raise Stop  # Ctrl-C in the middle of this point's run

        def v(a: str, b: str) -> Verdict:
            return Verdict(word(level[a], level[b]), level[b] / level[a], (0.9, 1.1), "sim")

        return BisectPoint(lo, mid, hi, f"r-{mid}", attempt, v(lo, mid), v(hi, mid), v(lo, hi), 1.0)

    monkeypatch.setattr(bisect.provision, "fetch", lambda spec: None)
    monkeypatch.setattr(bisect.provision.BuildSpec, "parse", staticmethod(lambda s: s))
    monkeypatch.setattr(Bisection, "_measure", measure)
    monkeypatch.setattr(Bisection, "check_step", lambda self: None)  # parses real specs


def request() -> BisectRequest:
    builds = tuple(f"rocksdb@1.{i}.0" for i in range(len(LEVELS)))
    return BisectRequest(builds=builds, benchmark="kv", step="revrange", sizes={"keys": 1000})


def test_a_stopped_bisection_resumes_where_it_stopped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    whole: list[Any] = []
    patched(monkeypatch, None, whole)
    straight = Bisection(request(), tmp_path / "straight", lambda _: None).run()

    first: list[Any] = []
    patched(monkeypatch, 3, first)
    with pytest.raises(Stop):
        Bisection(request(), tmp_path / "b", lambda _: None).run()
    req, points, _, current = load_state(tmp_path / "b")
    assert req == request() and len(points) == 2
    assert current is not None and current["mid"] == first[2][0]

    again: list[Any] = []
    patched(monkeypatch, None, again)
    lines: list[str] = []
    o = Bisection.resume(tmp_path / "b", lines.append).run()
    assert (o.first_bad, o.last_good) == (straight.first_bad, straight.last_good)
    assert o.first_bad == "rocksdb@1.11.0"
    assert [p.mid for p in o.points] == [p.mid for p in straight.points]
    # the two finished points were reused, not measured; the interrupted one resumed
    assert sum("reusing run" in line for line in lines) == 2
    assert again[0] == (first[2][0], True)
    assert len(first) - 1 + len(again) == len(whole)
    saved = json.loads((tmp_path / "b" / "bisect.json").read_text())
    assert saved["first_bad"] == "rocksdb@1.11.0" and saved["current"] is None


def test_resuming_something_else_says_what_to_give(tmp_path: Path) -> None:
    (tmp_path / "bisect.json").write_text("{}")
    with pytest.raises(BisectError, match="not a bisection that can be resumed"):
        load_state(tmp_path)


@pytest.mark.parametrize(
    ("benchmark", "builds", "step", "known"),
    [
        ("kv", ("rocksdb@7.10.2", "rocksdb@10.2.1"), "readrandom", True),
        ("kv", ("rocksdb@7.10.2", "rocksdb@10.2.1"), "qp100", False),
        ("insert", ("postgres@12.20.0", "postgres@17.2.0"), "qp100", True),
        ("insert", ("postgres@12.20.0", "postgres@17.2.0"), "qp101", False),
    ],
)
def test_an_unknown_step_is_said_before_any_run(
    tmp_path: Path, benchmark: str, builds: tuple[str, ...], step: str, known: bool
) -> None:
    b = Bisection(BisectRequest(builds=builds, benchmark=benchmark, step=step), tmp_path, print)
    if known:
        b.check_step()
    else:
        with pytest.raises(BisectError, match=f"{step}.*steps are"):
            b.check_step()
