"""The interleaved schedule's time verdicts: paired slices within a repeat, paired
repeats across the run (docs/verdicts.md, "The interleaved schedule").

Within one repeat, the base's engine and a column's engine ran the step in alternating
slices; slice k of each ran in the same turn of the cycle, so the host's drift at that
moment hits both. A repeat's ratio is the column's Q per second over its measured slices
against the base's over the same turns: one number per repeat, no interval of its own.

Across repeats (each a fresh pair of engines, so independent), the verdict is a
one-sample t-test of the repeats' log ratios against 0 (Student 1908), its p-values
adjusted by Benjamini-Hochberg across every step and column of the lab, and TOST
(Schuirmann 1987) with the (1 - 2 alpha) t interval against 1 ± band for `same`. A
repeat's log ratio is its engines' true ratio plus the error of its slices, so the
spread of the repeats' log ratios already holds both the between-repeat and the
within-repeat variance, and the t interval with n - 1 degrees of freedom accounts for
both without a separate within-repeat error. A random-effects combination of repeats
(DerSimonian & Laird 1986), weighting each by its own error, is anti-conservative with
3-5 repeats (its between-repeat variance is estimated from n - 1 degrees of freedom and
then treated as known; bench/cost_noise.py measures it). The t test assumes the log
ratios are roughly normal; it is what lets 3 repeats decide (the signed-rank test's
smallest two-sided p with 5 repeats is 0.0625).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from statistics import NormalDist
from typing import TypedDict, TypeVar

from dbregress.analysis import distributions, stats
from dbregress.analysis.verdict import Policy, StepVerdict, usable

Key = TypeVar("Key", bound=Hashable)


class PairedSlices(TypedDict):
    """A repeat's paired figures (a step result's `paired`, less the base's name)."""

    ratio: float | None
    pairs: int


def measured_slices(slices: Sequence[Sequence[float]]) -> list[tuple[float, float] | None]:
    """Per slice (turn), its (seconds, Q) when the whole slice was measured (after the
    warm-up: q equals q_all) and lasted, else None; rows are [t_s, slice_s, q, q_all]."""
    out: list[tuple[float, float] | None] = []
    for _t, secs, q, q_all in slices:
        whole = secs > 0 and q > 0 and q >= q_all
        out.append((secs, q) if whole else None)
    return out


def pair_slices(base: Sequence[Sequence[float]], other: Sequence[Sequence[float]]) -> PairedSlices:
    """A repeat's paired figures: `ratio` (other / base, Q per second over the turns
    both measured whole; None without such a turn) and `pairs` (those turns). A step of
    one long call (l.x, a flush) runs in one slice per side, back to back: their rates
    still pair."""
    a, b = measured_slices(base), measured_slices(other)
    pairs = [(x, y) for x, y in zip(a, b, strict=False) if x is not None and y is not None]
    if not pairs:
        return {"ratio": None, "pairs": 0}
    base_rate = sum(x[1] for x, _ in pairs) / sum(x[0] for x, _ in pairs)
    other_rate = sum(y[1] for _, y in pairs) / sum(y[0] for _, y in pairs)
    return {"ratio": other_rate / base_rate, "pairs": len(pairs)}


def _pct(confidence: float) -> str:
    return f"{math.floor(confidence * 100 + 1e-9)}%"


def paired_all(
    samples: Mapping[Key, Sequence[float | None]], policy: Policy
) -> dict[Key, StepVerdict]:
    """A QPS verdict for every key from its repeats' paired ratios (column / base).
    Benjamini-Hochberg runs over all keys given: pass one lab's at once."""
    ratios = {k: usable(v) for k, v in samples.items()}
    tests: dict[Key, tuple[float, float, float, int]] = {}  # mean, se, p, n
    for k, r in ratios.items():
        if len(r) < 2:
            continue
        logs = stats.logs(r)
        n = len(logs)
        mean = sum(logs) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
        se = sd / math.sqrt(n)
        # Identical repeats (se 0) are exactly as far from 0 as their mean.
        p = 2 * distributions.t_sf(abs(mean) / se, n - 1) if se > 0 else float(mean == 0)
        tests[k] = (mean, se, p, n)
    adjusted = dict(zip(tests, stats.bh_adjusted([t[2] for t in tests.values()]), strict=True))
    out: dict[Key, StepVerdict] = {}
    for k, r in ratios.items():
        n = len(r)
        if k not in tests:
            ratio = r[0] if r else None
            why = "no paired repeats" if not r else "only 1 paired repeat"
            out[k] = StepVerdict(ratio, None, None, None, "undecided", n, n, None, why)
            continue
        mean, se, p, n = tests[k]
        q = adjusted[k]
        t_ci = distributions.t_ppf(1 - policy.alpha / 2, n - 1)
        t_tost = distributions.t_ppf(1 - policy.alpha, n - 1)
        ci = (math.exp(mean - t_ci * se), math.exp(mean + t_ci * se))
        lo, hi = math.exp(mean - t_tost * se), math.exp(mean + t_tost * se)
        ratio = math.exp(mean)
        conf = 1 - policy.alpha
        band = f"±{policy.band * 100:g}%"
        if lo >= 1 - policy.band and hi <= 1 + policy.band:
            why = f"{_pct(1 - 2 * policy.alpha)} CI {lo:.3f}-{hi:.3f} inside {band} (paired)"
            out[k] = StepVerdict(ratio, ci, conf, p, "same", n, n, None, why)
            continue
        test = f"paired t p={p:.2g} (BH-adjusted {q:.2g}), {n} repeats"
        if q <= policy.alpha and mean != 0:
            word = "faster" if mean > 0 else "slower"
            effect = "better" if mean > 0 else "worse"
            out[k] = StepVerdict(ratio, ci, conf, p, word, n, n, None, test, effect)
            continue
        more = _more_repeats(mean, se * math.sqrt(n), n, policy)
        parts = [test, f"{_pct(1 - 2 * policy.alpha)} CI {lo:.3f}-{hi:.3f} not inside {band}"]
        if more is not None:
            parts.append(f"~{n + more} repeats would probably decide")
        out[k] = StepVerdict(ratio, ci, conf, p, "undecided", n, n, more, "; ".join(parts))
    return out


def _more_repeats(mean: float, sd: float, n: int, policy: Policy) -> int | None:
    """Extra repeats at which, by the normal approximation, either the test or the
    equivalence interval would probably decide; None when out of reach."""
    if sd <= 0 or not math.isfinite(sd):
        return None
    z = NormalDist().inv_cdf(1 - policy.alpha / 2)
    needed = []
    if mean != 0:
        needed.append(math.ceil((z * sd / abs(mean)) ** 2) + 1)
    margin = min(mean - math.log1p(-policy.band), math.log1p(policy.band) - mean)
    if margin > 0:
        zt = NormalDist().inv_cdf(1 - policy.alpha)
        needed.append(math.ceil((zt * sd / margin) ** 2) + 1)
    if not needed:
        return None
    extra = max(min(needed), n + 1) - n
    return extra if extra <= policy.max_more else None
