"""explain's profiling replay drops the page cache where the timed run did; when it
cannot, the profile says so beside its flame graphs (recorded in explain.json, not only
said on stderr)."""

from __future__ import annotations

from typing import Any, cast

from dbregress.explain.profiling import stamp
from dbregress.report.explanations import _flames
from dbregress.shapes.explain import ExplainEntry, Profiled


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
    assert "The profile of b ran without the page cache dropped before this step" in text
    assert "(no permission to drop), unlike the timed run, which dropped it" in text
    assert "The profile of a" not in text
    # when the timed run could not drop it either, the note does not claim it did
    both = "\n".join(_flames("c", "qr100", ["a", "b"], entries, "no permission"))
    assert "the timed run recorded a failed drop too (no permission)" in both
    assert "unlike the timed run" not in both
    entries[("c", "qr100", "b")] = entry("b", flame="b.svg")
    assert "page cache" not in "\n".join(_flames("c", "qr100", ["a", "b"], entries))


def test_a_failed_drop_is_stamped_on_its_own_step_only() -> None:
    """replay returns, by step, why the drop before it failed; the profile stamps that
    step's entry only (a failure before step 3 says nothing of step 1)."""
    found = cast(dict[str, Profiled], {"l.i0": {"count": 1}, "qr100": {"count": 1}})
    out = stamp(found, {"qr100": "no permission", "l.x": "not profiled"})
    assert out["qr100"]["cache_not_dropped"] == "no permission"
    assert "cache_not_dropped" not in out["l.i0"] and set(out) == {"l.i0", "qr100"}
