"""explain's profiling replay drops the page cache where the timed run did; when it
cannot, the profile says so beside its flame graphs (recorded in explain.json, not only
said on stderr)."""

from __future__ import annotations

from typing import Any, cast

from dbregress.report.explanations import _flames
from dbregress.shapes.explain import ExplainEntry


def entry(label: str, **profile: Any) -> ExplainEntry:
    return cast(
        ExplainEntry,
        {"comparison": "c", "step": "qr100", "column": label, "profile": {**profile}},
    )


def test_a_profile_without_the_drop_says_so_beside_its_flame_graphs() -> None:
    entries = {
        ("c", "qr100", "a"): entry("a", flame="a.svg"),
        ("c", "qr100", "b"): entry(
            "b", flame="b.svg", diff="b-a.svg", cache_not_dropped="no permission to drop"
        ),
    }
    text = "\n".join(_flames("c", "qr100", ["a", "b"], entries))
    assert "Flame graphs (CPU ns per operation): [a](a.svg), [b](b.svg)" in text
    assert "The profile of b ran without the page cache dropped" in text
    assert "(no permission to drop)" in text and "The profile of a" not in text
    entries[("c", "qr100", "b")] = entry("b", flame="b.svg")
    assert "page cache" not in "\n".join(_flames("c", "qr100", ["a", "b"], entries))
