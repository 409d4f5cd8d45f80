"""The cost verdict's error rates on simulated replays whose count takes two states.

A step's count per operation may take one of two values a gap G apart (RocksDB's
overwriteandwait: one replay in three 1.7% low), each replay drawing the low state with
probability p, plus a small within-state spread. Each simulated lab is one step of two
columns: `count_replays` replays a side; where `needs_more` says so (a side's replays
split into clusters or disagree beyond the band) and `count_replays_max` allows it, both
sides get that many (the lane's extension); then `compare_counts` judges (a family of
one: the lab-wide Benjamini-Hochberg correction only makes a lab of many steps stricter
per step). Prints, per setting, the share of labs judged slower, faster, same and
undecided.

    uv run python bench/cost_noise.py              # 10,000 labs per row
    uv run python bench/cost_noise.py --labs 2000 --seed 3

Rows: A/A under two states (every p and G, 3 and 5 replays to start; with and without
an A/A calibration floor), A/A with one state and a tiny spread, a real 3% change under
two states and clean, a clean 5% change; and the interleaved schedule's repeat test
against a DerSimonian-Laird combination of repeats (docs/verdicts.md).
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
from collections import Counter
from collections.abc import Callable
from functools import cache

from scipy import stats as sps

from dbregress.analysis.cost import compare_counts, needs_more
from dbregress.lab.file import VerdictPolicy

WITHIN = 0.0002  # sd of log counts within one state (0.02%, overwritesome's replays)
Draw = Callable[[random.Random], float]


def two_states(p_low: float, gap: float, level: float = 1.0) -> Draw:
    """A replay's count: `level`, or `gap` lower with probability p_low; 0.02% jitter."""

    def draw(rng: random.Random) -> float:
        low = rng.random() < p_low
        return level * math.exp(-gap * low + rng.gauss(0, WITHIN))

    return draw


def lab(
    rng: random.Random,
    base: Draw,
    column: Draw,
    start: int,
    most: int,
    policy: VerdictPolicy,
    known: float | None = None,
) -> str:
    x = [base(rng) for _ in range(most)]
    y = [column(rng) for _ in range(most)]
    n = start
    first = (x[:start], y[:start])
    if start < most and needs_more(first, policy.cost_band, [first], policy.alpha):
        n = most
    floors = [("the A/A calibration", known)] if known else []
    return compare_counts(x[:n], y[:n], policy, settled=most, known_sd=floors).verdict


def rates(
    labs: int, seed: int, base: Draw, column: Draw, start: int, most: int, known: float | None
) -> Counter[str]:
    rng = random.Random(seed)
    policy = VerdictPolicy()
    return Counter(lab(rng, base, column, start, most, policy, known) for _ in range(labs))


def row(name: str, found: Counter[str], labs: int, exact: float | None = None) -> None:
    cells = " | ".join(f"{found[v] / labs:6.2%}" for v in ("slower", "faster", "same", "undecided"))
    print(f"| {name} | {cells} | {'' if exact is None else f'{exact:.2%}'} |")


@cache
def _pattern_verdicts(gap: float, start: int) -> tuple[tuple[tuple[bool, ...], str], ...]:
    rng = random.Random(1)
    out = []
    for low in itertools.product((False, True), repeat=10):
        values = [math.exp(-gap * s + rng.gauss(0, WITHIN)) for s in low]
        x, y = values[:5], values[5:]
        first = (x[:start], y[:start])
        n = 5 if start < 5 and needs_more(first, 0.01, [first]) else start
        out.append((low, compare_counts(x[:n], y[:n], settled=5).verdict))
    return tuple(out)


def exact_false(gap: float, start: int, p_low: float) -> float:
    """The A/A false slower+faster rate summed over all 1,024 patterns of states of the
    ten replays (one jitter draw per pattern)."""
    return sum(
        math.prod(p_low if s else 1 - p_low for s in low)
        for low, verdict in _pattern_verdicts(gap, start)
        if verdict in ("slower", "faster")
    )


def dl_against_t(labs: int, seed: int, repeats: int, tau: float) -> tuple[float, float]:
    """Interleaved: false `slower`/`faster` rate at alpha 0.05 of the one-sample t-test
    on n repeats' log ratios and of a DerSimonian-Laird random-effects z-test on the same
    repeats, each with its own batch-means standard error (10 batches, within-repeat sd
    of a batch 3%), between-repeat sd tau."""
    rng = random.Random(seed)
    t_hits = dl_hits = 0
    z = 1.959964
    for _ in range(labs):
        means, ses = [], []
        for _r in range(repeats):
            effect = rng.gauss(0, tau)
            batches = [effect + rng.gauss(0, 0.03) for _ in range(10)]
            m = sum(batches) / 10
            sd = math.sqrt(sum((b - m) ** 2 for b in batches) / 9)
            means.append(m)
            ses.append(sd / math.sqrt(10))
        n = repeats
        mean = sum(means) / n
        sd = math.sqrt(sum((v - mean) ** 2 for v in means) / (n - 1))
        t = abs(mean) / (sd / math.sqrt(n))
        t_hits += 2 * sps.t.sf(t, n - 1) <= 0.05
        w = [1 / s**2 for s in ses]
        fixed = sum(wi * m for wi, m in zip(w, means, strict=True)) / sum(w)
        q = sum(wi * (m - fixed) ** 2 for wi, m in zip(w, means, strict=True))
        c = sum(w) - sum(wi**2 for wi in w) / sum(w)
        tau2 = max(0.0, (q - (n - 1)) / c)
        wr = [1 / (s**2 + tau2) for s in ses]
        est = sum(wi * m for wi, m in zip(wr, means, strict=True)) / sum(wr)
        dl_hits += abs(est) / math.sqrt(1 / sum(wr)) >= z
    return t_hits / labs, dl_hits / labs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labs", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    labs, seed = a.labs, a.seed
    print(f"{labs} simulated labs per row, alpha 0.05, band ±1%, within-state sd {WITHIN:.2%}")
    print()
    print("| setting | slower | faster | same | undecided | exact slower+faster |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    for start in (3, 5):
        for gap in (0.01, 0.017, 0.02):
            for p in (0.1, 0.2, 0.3, 0.4, 0.5):
                draw = two_states(p, gap)
                found = rates(labs, seed, draw, draw, start, 5, None)
                worst = max(worst, (found["slower"] + found["faster"]) / labs)
                exact = exact_false(gap, start, p)
                name = f"A/A two states {gap:.1%} apart, p low {p:.1f}, {start}->5"
                row(name, found, labs, exact)
    for gap, p in ((0.017, 1 / 3), (0.02, 0.5)):
        draw = two_states(p, gap)
        known = gap * math.sqrt(p * (1 - p))  # what an A/A calibration of the step measures
        found = rates(labs, seed, draw, draw, 3, 5, known)
        row(f"A/A two states {gap:.1%}, p {p:.2f}, 3->5, calibration sd {known:.2%}", found, labs)
    clean = two_states(0.0, 0.0)
    row("A/A one state, sd 0.02%, 3->5", rates(labs, seed, clean, clean, 3, 5, None), labs)
    for change in (0.03, 0.05):
        up = two_states(0.0, 0.0, 1 + change)
        row(f"clean +{change:.0%}, 3->5", rates(labs, seed, clean, up, 3, 5, None), labs)
    for gap, p in ((0.017, 1 / 3), (0.02, 0.5)):
        found = rates(labs, seed, two_states(p, gap), two_states(p, gap, 1.03), 3, 5, None)
        row(f"+3% under two states {gap:.1%}, p {p:.2f}, 3->5", found, labs)
    print()
    print(f"worst A/A false slower+faster over the two-state rows: {worst:.2%}")
    print()
    print("Interleaved, false slower/faster at alpha 0.05 (A/A, within-repeat batch sd 3%):")
    print("| repeats | between-repeat sd | one-sample t | DerSimonian-Laird z |")
    print("|---|---|---|---|")
    for repeats in (3, 5):
        for tau in (0.0, 0.01, 0.03):
            t_rate, dl_rate = dl_against_t(labs, seed, repeats, tau)
            print(f"| {repeats} | {tau:.0%} | {t_rate:.2%} | {dl_rate:.2%} |")


if __name__ == "__main__":
    main()
