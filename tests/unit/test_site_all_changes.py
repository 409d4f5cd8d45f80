"""The site reads an --all-changes bisection's answer: its changes, not "not finished"."""

from __future__ import annotations

import json
from pathlib import Path

from dbregress.site.moved import bisection


def _write(tmp: Path, state: dict[str, object]) -> Path:
    path = tmp / "bisect.json"
    path.write_text(json.dumps(state))
    return path


def test_an_all_changes_bisection_names_its_changes(tmp_path: Path) -> None:
    state = {
        "request": {"step": "qp100", "lane": "cost", "all_changes": True, "builds": ["a", "b"]},
        "builds": ["a", "b", "c"],
        "first_bad": None,
        "points": [],
        "changes": [
            {"commit": "c1", "build": "postgres@17.2.0", "direction": "slower", "ratio": 1.004},
            {"commit": "c2", "build": "postgres@17.4.0", "direction": "faster", "ratio": 0.99},
        ],
        "counted": 3,
    }
    problems: list[str] = []
    found = bisection(tmp_path, _write(tmp_path, state), problems)
    assert found is not None and not problems
    assert "2 change(s)" in found.answer and "(slower)" in found.answer
    assert "(faster)" in found.answer


def test_an_unfinished_all_changes_bisection_is_not_finished(tmp_path: Path) -> None:
    state = {
        "request": {"step": "qp100", "lane": "cost", "all_changes": True},
        "builds": ["a", "b"],
        "changes": [],
        "counted": 0,
    }
    found = bisection(tmp_path, _write(tmp_path, state), [])
    assert found is not None and found.answer == "not finished"
