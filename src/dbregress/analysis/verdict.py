"""Verdicts for (step, column) against the base from repeats (docs/verdicts.md).

Per key: the Hodges-Lehmann ratio of the logs with its Moses interval, a two-sided
Mann-Whitney test whose p-values Benjamini-Hochberg adjusts across every key of one call,
and a TOST equivalence check (Schuirmann 1987) of the (1 - 2 alpha) Moses interval
against 1 ± band. One of four verdicts:

- `same`: the (1 - 2 alpha) interval lies inside 1 ± band (checked first: a real but
  tiny change is practically the same);
- `slower` / `faster` (QPS words) or `higher` / `lower` (metric words, `metric=True`):
  BH rejects "no shift" at alpha, and the estimate says which way;
- `undecided`: neither; `more_repeats` estimates what would probably decide it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TypeVar

from dbregress.analysis import stats
from dbregress.analysis.metrics import Better

Key = TypeVar("Key", bound=Hashable)
_Z = NormalDist()


@dataclass(frozen=True)
class StepVerdict:
    """One (step, column) against the base, one metric."""

    ratio: float | None  # exp(Hodges-Lehmann shift of the logs); None if a side has no samples
    ci: tuple[float, float] | None  # (1 - alpha) Moses interval on the ratio scale
    ci_confidence: float | None  # what that interval actually achieves
    p_value: float | None  # two-sided Mann-Whitney, before the BH adjustment
    verdict: str  # same | slower | faster | undecided (QPS); same | higher | lower | undecided
    n_base: int
    n_other: int
    more_repeats: int | None  # undecided: extra repeats per side that would probably decide
    reason: str  # one short line
    effect: str = ""  # better | worse for slower/faster/higher/lower, "" otherwise


@dataclass(frozen=True)
class Policy:
    """How sure a verdict must be."""

    alpha: float = 0.05  # false-alarm rate over all keys of one call (BH); TOST at 1-2 alpha
    band: float = 0.05  # `same` when the interval lies inside 1 ± band
    max_more: int = 50  # more_repeats beyond this is reported as None (out of reach)

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 0.5 or not 0 < self.band < 1 or self.max_more < 0:
            raise ValueError(f"invalid verdict policy {self}")


def usable(values: Sequence[float | None]) -> list[float]:
    """The values a verdict uses: missing, non-finite and non-positive ones are dropped."""
    return [float(v) for v in values if v is not None and math.isfinite(v) and v > 0]


def _pct(confidence: float) -> str:
    return f"{math.floor(confidence * 100 + 1e-9)}%"


def repeats_to_decide(
    shift: float, sd_log: float, level: float, alpha: float, band: float
) -> int | None:
    """Repeats per side at which, by the normal approximation on logs with spread sd_log,
    (a) |shift| exceeds the test's half-width z_(1-level/2) * sd_log * sqrt(2/n), or (b) the
    90% (1 - 2 alpha) interval shift ± z_(1-alpha) * sd_log * sqrt(2/n) fits in 1 ± band;
    whichever needs fewer, and never fewer than the exact test or interval can work with.
    One of the two always can (a shift of 0 lies inside the band); None without a finite
    spread."""
    if not math.isfinite(sd_log) or not math.isfinite(shift):
        return None
    needed = []
    if shift != 0:
        z = _Z.inv_cdf(1 - level / 2)
        n = math.ceil(2 * (z * sd_log / abs(shift)) ** 2)
        needed.append(max(n, stats.min_n_for_p(level)))
    margin = min(shift - math.log1p(-band), math.log1p(band) - shift)
    if margin > 0:
        z = _Z.inv_cdf(1 - alpha)
        n = math.ceil(2 * (z * sd_log / margin) ** 2)
        needed.append(max(n, stats.min_n_for_p(2 * alpha)))  # 1 - 2 alpha reachable
    return min(needed) if needed else None


@dataclass(frozen=True)
class _Evidence:
    x: list[float]
    y: list[float]
    shift: float | None = None
    test: stats.MannWhitney | None = None
    ci: tuple[float, float, float] | None = None
    tost: tuple[float, float, float] | None = None


def _evidence(
    base: Sequence[float | None], other: Sequence[float | None], alpha: float
) -> _Evidence:
    x, y = usable(base), usable(other)
    if not x or not y:
        return _Evidence(x, y)
    if len(x) < 2 or len(y) < 2:
        return _Evidence(x, y, stats.hodges_lehmann(x, y))
    s = stats.shift(x, y, (1 - alpha, 1 - 2 * alpha))
    ci, tost = s.intervals
    return _Evidence(x, y, s.estimate, s.test, ci, tost)


def _direction(shift: float, better: Better, metric: bool) -> tuple[str, str]:
    up = shift > 0
    effect = "better" if up == (better == "higher") else "worse"
    if metric:
        return ("higher" if up else "lower"), effect
    return ("faster" if effect == "better" else "slower"), effect


def _few(e: _Evidence) -> str:
    sides = [(len(e.x), "the base"), (len(e.y), "the column")]
    n, side = min(sides)
    if n == 0:
        return "no repeats of " + (side if len(e.x) + len(e.y) else "either side")
    return f"only 1 repeat of {side}"


def _judge(
    e: _Evidence,
    adjusted: float | None,
    level: float,
    policy: Policy,
    better: Better,
    metric: bool,
) -> StepVerdict:
    nb, no = len(e.x), len(e.y)
    if e.shift is None:
        return StepVerdict(None, None, None, None, "undecided", nb, no, None, _few(e))

    def more() -> int | None:
        assert e.shift is not None
        sd = stats.robust_log_sd(*(s for s in (e.x, e.y) if len(s) >= 2))
        needed = repeats_to_decide(e.shift, sd, level, policy.alpha, policy.band)
        if needed is None:
            return None
        extra = max(needed, min(nb, no) + 1) - min(nb, no)
        return extra if extra <= policy.max_more else None

    ratio = math.exp(e.shift)
    if e.test is None or e.ci is None or e.tost is None or adjusted is None:
        return StepVerdict(ratio, None, None, None, "undecided", nb, no, more(), _few(e))
    ci, p = (e.ci[0], e.ci[1]), e.test.p
    lo, hi, conf = e.tost
    band = f"±{policy.band * 100:g}%"
    tost_reach = conf >= (1 - 2 * policy.alpha) * (1 - 1e-9)
    if tost_reach and lo >= 1 - policy.band and hi <= 1 + policy.band:
        why = f"{_pct(conf)} CI {lo:.3f}-{hi:.3f} inside {band}"
        return StepVerdict(ratio, ci, e.ci[2], p, "same", nb, no, None, why)
    test = f"Mann-Whitney p={p:.2g} (BH-adjusted {adjusted:.2g})"
    if e.test.method != "exact":
        test += f", ties: {e.test.method}"
    if adjusted <= policy.alpha and e.shift != 0:
        word, effect = _direction(e.shift, better, metric)
        return StepVerdict(ratio, ci, e.ci[2], p, word, nb, no, None, test, effect)
    parts, limits = [test], []
    if tost_reach:
        parts.append(f"{_pct(conf)} CI {lo:.3f}-{hi:.3f} not inside {band}")
    else:
        limits.append(f"a {_pct(1 - 2 * policy.alpha)} CI")
    if stats.smallest_p(nb, no) > policy.alpha:
        limits.append(f"p<={policy.alpha:g}")
    if limits:
        parts.append(f"{nb} vs {no} repeats cannot reach " + " or ".join(limits))
    extra = more()
    if extra is not None:
        parts.append(f"~{min(nb, no) + extra} per side would probably decide")
    return StepVerdict(ratio, ci, e.ci[2], p, "undecided", nb, no, extra, "; ".join(parts))


def compare_all(
    samples: Mapping[Key, tuple[Sequence[float | None], Sequence[float | None]]],
    policy: Policy,
    better: Better = "higher",
    *,
    metric: bool = False,
) -> dict[Key, StepVerdict]:
    """A verdict for every key from its (base samples, column samples).

    Benjamini-Hochberg runs over the p-values of all keys given, so pass one lab's QPS at
    once, and each per-op metric of the lab in its own call. `better` says which direction
    of the metric is good; the verdict words are slower/faster (`metric=False`: throughput,
    or a time when better="lower") or higher/lower (`metric=True`), and `effect` says
    whether that is better or worse.
    """
    evidence = {k: _evidence(base, other, policy.alpha) for k, (base, other) in samples.items()}
    tested = {k: e.test.p for k, e in evidence.items() if e.test is not None}
    adjusted = dict(zip(tested, stats.bh_adjusted(list(tested.values())), strict=True))
    rejected = sum(q <= policy.alpha for q in adjusted.values())
    out = {}
    for k, e in evidence.items():
        q = adjusted.get(k)
        # The level at which BH would let this key join the current rejections.
        family = len(tested) + (q is None)
        level = policy.alpha * min(rejected + 1, family) / family
        out[k] = _judge(e, q, level, policy, better, metric)
    return out
