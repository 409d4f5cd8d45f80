"""Change points over an ordered series of columns: where a step's level shifts between
versions (or configs, in the order the lab gives them). docs/changepoints.md explains the
method and its measured rates.

Input: per column, the samples of one lane (the time lane's repeats of QPS, the cost
lane's replays of estimated cycles per operation). On the logs of the samples:

1. **Noise model.** A column's mean log m_i has variance v_i = s_w^2 / n_i + tau^2:
   s_w^2 is the pooled variance of the samples within columns (the repeats' or replays'
   own disagreement, floored at `floor_sd`^2), tau^2 the extra variance between
   neighbouring columns that the samples do not show (a host drifting between columns;
   small version-to-version differences of the cost lane's counts that are not a level
   shift). tau^2 comes from the successive differences of the column means, robustly
   (1.4826 x their median absolute value; a few real shifts barely move a median):
   Var(m_(i+1) - m_i) = v_i + v_(i+1) on a flat stretch.
2. **Candidates: PELT** (Killick, Fearnhead & Eckley 2012) from `ruptures`, over the
   columns, with the segment cost sum_i w_i (m_i - weighted mean)^2, w_i = 1 / v_i: minus
   twice the Gaussian log-likelihood of a constant level, so a change point pays its way
   when it lowers that by more than the penalty. The penalty is Schwarz's (SIC/BIC):
   2 log K for K columns, each change point adding two parameters (a position and a level)
   to the model.
3. **Confirmation: a two-sample test per candidate** (as Apache Otava confirms
   E-Divisive's candidates with Student's t-test, Fleming et al. 2023): the weighted mean
   of the segment before against the segment after, z = d / se with
   se^2 = 1 / W_before + 1 / W_after, t-distributed with the pooled degrees of freedom.
   Its p-value is multiplied by K - 1, the number of places a change point could have
   been chosen (the search picked the best of them; Bonferroni), then Benjamini-Hochberg
   runs across every series of one call. The weakest candidate above alpha is dropped
   and the rest re-tested against their new neighbours, until every one passes.
4. **Verdict**, as the lanes give one: `same` when the (1 - 2 alpha) interval of the
   ratio lies inside 1 +/- band (a real shift too small to matter for a gate); such a
   shift that is confirmed (BH) and whose interval clears 1 +/- `small_floor` (the cost
   lane's small-change floor) is kept as `small` rather than dropped: the thousand cuts
   are made of them (docs/ledger.md); else `slower` or `faster` for a confirmed shift
   (QPS down, or cost per operation up, is slower).

Assumptions: samples within a column are independent and roughly log-normal; between
change points the level is constant up to tau; columns are ordered as the builds were
released (or as the user listed them).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal, TypeVar

import numpy as np

from dbregress.analysis import distributions, pelt, stats

Key = TypeVar("Key", bound=Hashable)
Better = Literal["higher", "lower"]


# The false-alarm rate of change points over all series of one call (Benjamini-Hochberg).
# Stricter than the lab's verdict alpha: a report of a flat 10-version series with 5
# repeats per version shows a false change point in ~1% of runs at this level, ~5% at 0.05.
ALPHA = 0.01

# tau^2 is estimated only when Cochran's Q test finds the columns of a segment more
# scattered than their samples explain at this level.
HETEROGENEITY = 0.05


@dataclass(frozen=True)
class Change:
    """A level shift: columns[index] is the first column of the new level."""

    index: int  # position in the series given (columns without samples count)
    before: tuple[int, int]  # the segment before, [first, last] positions
    after: tuple[int, int]  # the segment after
    ratio: float  # the after level over the before level (the lane's own metric)
    ci: tuple[float, float]  # (1 - alpha) interval of the ratio
    p_value: float  # the test's, times the K - 1 places (capped at 1)
    adjusted: float  # that, Benjamini-Hochberg across the call's series
    verdict: str  # slower | faster | same | undecided
    reason: str
    # a confirmed shift inside the band whose interval clears 1 ± the small-change floor
    # (the cost lane's: docs/ledger.md): `same` for every gate, kept and named
    small: bool = False

    @property
    def decided(self) -> bool:
        return self.verdict in ("slower", "faster")

    @property
    def mark(self) -> str:
        """▼ slower, ▲ faster; a small shift (the cost lane's: above 1 is more work)
        ▽ more, △ less."""
        if self.small:
            return "▽" if self.ratio > 1 else "△"
        return {"slower": "▼", "faster": "▲"}.get(self.verdict, "")

    @property
    def word(self) -> str:
        """The verdict, or `small` for a small shift."""
        return "small" if self.small else self.verdict


@dataclass(frozen=True)
class Series:
    """One step's series in one lane and what the method found in it."""

    levels: tuple[float | None, ...]  # geometric mean per column; None without samples
    counts: tuple[int, ...]  # samples per column
    changes: tuple[Change, ...]  # confirmed and dismissed candidates, in order
    sd_within: float  # s_w, on the log scale
    sd_between: float  # tau, on the log scale

    def decided(self) -> list[Change]:
        return [c for c in self.changes if c.decided]

    def moved(self) -> list[Change]:
        """The decided change points and the small ones."""
        return [c for c in self.changes if c.decided or c.small]


SeriesKey = tuple[str, str]  # (comparison, step)


@dataclass(frozen=True)
class RunChanges:
    """A run's series and their change points, per lane (analysis/series.py)."""

    time: dict[SeriesKey, Series]  # QPS, higher is better
    cost: dict[SeriesKey, Series]  # estimated cycles per operation, lower is better
    alpha: float

    def lane(self, lane: str) -> dict[SeriesKey, Series]:
        return self.cost if lane == "cost" else self.time

    def of(self, comparison: str) -> dict[str, dict[str, Series]]:
        """lane -> step -> series of one comparison."""
        return {
            lane: {s: x for (c, s), x in self.lane(lane).items() if c == comparison}
            for lane in ("time", "cost")
        }


@dataclass(frozen=True)
class _Fit:
    m: np.ndarray  # mean log per usable column
    w: np.ndarray  # 1 / variance of that mean
    positions: list[int]  # usable column -> position in the series
    df: float
    sd_within: float
    sd_between: float


def _fit(columns: Sequence[Sequence[float]], floor_sd: float) -> _Fit | None:
    logs, positions = [], []
    for i, col in enumerate(columns):
        good = stats.logs([v for v in col if v is not None and math.isfinite(v) and v > 0])
        if good:
            logs.append(good)
            positions.append(i)
    k = len(logs)
    if k < 2:
        return None
    means = np.array([statistics.fmean(x) for x in logs])
    n = np.array([len(x) for x in logs], dtype=float)
    df_within = float(sum(len(x) - 1 for x in logs))
    var_w = 0.0
    if df_within > 0:
        ss = sum(sum((v - statistics.fmean(x)) ** 2 for v in x) for x in logs)
        var_w = max(ss / df_within, floor_sd**2)
    tau2 = 0.0
    diffs = np.diff(means)
    if df_within == 0:
        if k < 3:
            return None  # two single numbers: nothing to tell noise from a shift
        tau2 = (stats.MAD * float(np.median(np.abs(diffs)))) ** 2 / 2
    if df_within == 0:
        tau2 = max(tau2, floor_sd**2)
        df = float(k - 1)
    else:
        # Segment with the samples' noise alone, estimate tau^2 from what is left within
        # the segments, segment again with it, until the segments stop changing.
        seen: set[tuple[int, ...]] = set()
        while True:
            cuts = _pelt(means, 1 / (var_w / n + tau2))
            if tuple(cuts) in seen:
                break
            seen.add(tuple(cuts))
            tau2 = _between(means, var_w / n, cuts)
        df = df_within if tau2 == 0 else min(df_within, float(k - 1 - len(cuts)))
    v = var_w / n + tau2
    if not np.all(v > 0):
        return None
    return _Fit(means, 1 / v, positions, max(df, 1.0), math.sqrt(var_w), math.sqrt(tau2))


_LAST: dict[tuple[bytes, bytes], list[int]] = {}


def _pelt(m: np.ndarray, w: np.ndarray) -> list[int]:
    """Usable-column indices where PELT starts a new segment. The last search is kept:
    `_candidates` asks again for the one `_fit` ended on (a third of the site's time)."""
    key = (m.tobytes(), w.tobytes())
    cuts = _LAST.get(key)
    if cuts is None:  # (another thread's search may replace it: then it is searched again)
        cuts = pelt.segment_starts(m, w)
        _LAST.clear()
        _LAST[key] = cuts
    return list(cuts)


def _between(m: np.ndarray, v: np.ndarray, cuts: list[int]) -> float:
    """tau^2 by DerSimonian & Laird's moment estimator (random-effects meta-analysis)
    over the segments: Q = sum w_i (m_i - segment mean)^2 has expectation
    (K - segments) + tau^2 (sum w - sum w^2 / sum w, per segment)."""
    w = 1 / v
    q, c = 0.0, 0.0
    edges = [0, *cuts, len(m)]
    for a, b in pairwise(edges):
        ws, ms = w[a:b], m[a:b]
        mu = float(np.sum(ws * ms) / np.sum(ws))
        q += float(np.sum(ws * (ms - mu) ** 2))
        c += float(np.sum(ws) - np.sum(ws**2) / np.sum(ws))
    df = len(m) - len(edges) + 1
    if df < 1 or c <= 0 or q <= distributions.chi2_ppf(1 - HETEROGENEITY, df):
        return 0.0  # Cochran's Q test: no evidence of variance beyond the samples'
    return max(0.0, (q - df) / c)


def _candidates(f: _Fit) -> list[int]:
    return _pelt(f.m, f.w)


@dataclass(frozen=True)
class _Test:
    d: float
    se: float
    p: float  # times K - 1


def _test(f: _Fit, start: int, cut: int, end: int) -> _Test:
    wb, wa = f.w[start:cut], f.w[cut:end]
    mb = float(np.sum(wb * f.m[start:cut]) / np.sum(wb))
    ma = float(np.sum(wa * f.m[cut:end]) / np.sum(wa))
    se = math.sqrt(1 / float(np.sum(wb)) + 1 / float(np.sum(wa)))
    d = ma - mb
    p = 2 * distributions.t_sf(abs(d) / se, f.df)
    return _Test(d, se, min(1.0, p * (len(f.m) - 1)))


def _tests(f: _Fit, cuts: list[int]) -> list[_Test]:
    edges = [0, *cuts, len(f.m)]
    return [_test(f, edges[i], edges[i + 1], edges[i + 2]) for i in range(len(cuts))]


def _word(d: float, better: Better) -> str:
    return "slower" if (d < 0) == (better == "higher") else "faster"


def _change(
    f: _Fit,
    cuts: list[int],
    i: int,
    t: _Test,
    q: float,
    alpha: float,
    band: float,
    better: Better,
    small_floor: float | None = None,
) -> Change:
    edges = [0, *cuts, len(f.m)]
    ppf = distributions.t_ppf(1 - alpha / 2, f.df)
    ppf2 = distributions.t_ppf(1 - alpha, f.df)
    ci = (math.exp(t.d - ppf * t.se), math.exp(t.d + ppf * t.se))
    lo, hi = math.exp(t.d - ppf2 * t.se), math.exp(t.d + ppf2 * t.se)
    test = f"p={t.p:.2g} over {len(f.m) - 1} places (BH-adjusted {q:.2g})"
    small = False
    if lo >= 1 - band and hi <= 1 + band:
        verdict, why = "same", f"{1 - 2 * alpha:.0%} CI {lo:.3f}-{hi:.3f} inside ±{band:g}"
        if small_floor is not None and q <= alpha:
            margin = math.log1p(small_floor)
            small = ci[0] > math.exp(margin) or ci[1] < math.exp(-margin)
            if small:
                why = f"{why}; a small shift: {test}, its interval clears ±{small_floor:.2%}"
    elif q <= alpha:
        verdict, why = _word(t.d, better), test
    else:
        verdict, why = "undecided", test
    pos = f.positions
    return Change(
        index=pos[cuts[i]],
        before=(pos[edges[i]], pos[edges[i + 1] - 1]),
        after=(pos[cuts[i]], pos[edges[i + 2] - 1]),
        ratio=math.exp(t.d),
        ci=ci,
        p_value=t.p,
        adjusted=q,
        verdict=verdict,
        reason=why,
        small=small,
    )


def find_all(
    series: Mapping[Key, Sequence[Sequence[float]]],
    *,
    better: Better,
    alpha: float = ALPHA,
    band: float = 0.05,
    floor_sd: float = 0.0,
    small_floor: float | None = None,
) -> dict[Key, Series]:
    """Change points of every series given: key -> samples per column, in order.
    Benjamini-Hochberg runs across all of them, so pass one lane's series of a report at
    once. `better` says which direction of the values is good (QPS: higher).
    `small_floor` (a fraction; the cost lane's cost_small_floor): a confirmed shift
    inside the band whose interval clears 1 ± it is kept as `small`; None: none is."""
    fits: dict[Key, _Fit] = {}
    cuts: dict[Key, list[int]] = {}
    for key, columns in series.items():
        f = _fit(columns, floor_sd)
        if f is not None:
            fits[key] = f
            cuts[key] = _candidates(f)
    # Drop the weakest candidate above alpha and re-test, until every one passes BH.
    while True:
        tests = {k: _tests(fits[k], c) for k, c in cuts.items()}
        flat = [(k, i) for k, ts in tests.items() for i in range(len(ts))]
        adjusted = stats.bh_adjusted([tests[k][i].p for k, i in flat])
        worst = max(range(len(flat)), key=lambda j: adjusted[j], default=None)
        if worst is None or adjusted[worst] <= alpha:
            break
        k, i = flat[worst]
        cuts[k].pop(i)
    q = dict(zip(flat, adjusted, strict=True))
    out: dict[Key, Series] = {}
    for key, columns in series.items():
        levels = tuple(_level(c) for c in columns)
        counts = tuple(len(stats.logs([v for v in c if v is not None and v > 0])) for c in columns)
        f = fits.get(key)
        if f is None:
            out[key] = Series(levels, counts, (), 0.0, 0.0)
            continue
        found = tuple(
            _change(f, cuts[key], i, t, q[(key, i)], alpha, band, better, small_floor)
            for i, t in enumerate(tests[key])
        )
        out[key] = Series(levels, counts, found, f.sd_within, f.sd_between)
    return out


def _level(values: Sequence[float]) -> float | None:
    good = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in good)) if good else None
