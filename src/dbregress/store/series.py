"""Reading a step's per-interval series (NN-<step>.csv) and histograms (NN-<step>.hlog)
back, for the charts of the HTML report.

The CSV has one row per second per op kind: `t_s,op,ops,rows,max_us,errors`, t_s being
the end of the interval, counted from the step's `go` (the warm-up included). The hlog
file has a `#` header line, then one `op,<HdrHistogram V2 compressed, base64>` line per
op kind, over the measured window only, in microseconds.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hdrh.histogram import HdrHistogram

# Percentiles of the latency curves, as in HdrHistogram's percentile distribution plots.
PERCENTILES = (0.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999)
# An interval shorter than this share of the usual one (the tail after the last full
# second) says nothing of the rate and would draw a spike or a drop.
SHORT_INTERVAL = 0.25


@dataclass(frozen=True)
class StepFiles:
    """Where one stored step result's files are (any may be missing)."""

    json: Path
    csv: Path
    hlog: Path


def step_index(job_dir: Path) -> dict[str, StepFiles]:
    """step name -> its files, for every step result in a job's folder
    (results/<run>/<label>/r<N>); {} when there is none."""
    steps = job_dir / "steps"
    try:
        names = sorted(os.listdir(steps))
    except OSError:
        return {}
    out = {}
    for name in names:
        index, _, rest = name.partition("-")
        if not index.isdigit() or not rest.endswith(".json") or rest.endswith(".spec.json"):
            continue
        stem = name.removesuffix(".json")
        out[rest.removesuffix(".json")] = StepFiles(
            steps / name, steps / f"{stem}.csv", steps / f"{stem}.hlog"
        )
    return out


def step_files(job_dir: Path, step: str) -> StepFiles | None:
    """The files of `step` in a job's folder, or None."""
    return step_index(job_dir).get(step)


def interval_rates(path: Path, op: str, field: str = "ops") -> list[tuple[float, float, float]]:
    """(start, end of the interval in s, `field` per second) for one op kind; [] when the
    file is missing or holds none. field is `ops` or `rows`. Short tail intervals are
    left out."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    if not lines:
        return []
    header = lines[0].split(",")
    try:
        t_at, op_at, value_at = header.index("t_s"), header.index("op"), header.index(field)
    except ValueError:
        return []
    ends: list[tuple[float, float]] = []
    for line in lines[1:]:
        cells = line.split(",")
        if len(cells) != len(header) or cells[op_at] != op:
            continue
        try:
            ends.append((float(cells[t_at]), float(cells[value_at])))
        except ValueError:
            continue
    out: list[tuple[float, float, float]] = []  # end, length, amount
    previous = 0.0
    for end, amount in sorted(ends):
        if end > previous:
            out.append((end, end - previous, amount))
            previous = end
    if not out:
        return []
    usual = statistics.median(length for _, length, _ in out)
    return [
        (end - length, end, amount / length)
        for end, length, amount in out
        if length >= SHORT_INTERVAL * usual
    ]


def read_histograms(path: Path) -> dict[str, str]:
    """op kind -> its encoded histogram, from a step's hlog file ({} when missing)."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    found = {}
    for line in lines:
        if line.startswith("#") or "," not in line:
            continue
        op, _, encoded = line.partition(",")
        if encoded.strip():
            found[op] = encoded.strip()
    return found


def percentile_curve(
    encoded: str, percentiles: tuple[float, ...] = PERCENTILES
) -> list[tuple[float, float]] | None:
    """(percentile, latency in µs) points of one encoded histogram (HdrHistogram V2
    compressed, base64), or None when it cannot be decoded or is empty. The values are
    the library's own (get_percentile_to_value_dict), found over the counts with numpy
    rather than its per-bucket Python loop."""
    try:
        h = HdrHistogram.decode(encoded)
    except Exception:  # the library raises bare errors of several kinds on bad input
        return None
    if h is None or h.get_total_count() == 0:
        return None
    cumulative = np.cumsum(np.ctypeslib.as_array(h.counts)[: h.counts_len])
    total = int(cumulative[-1])
    targets = [max(int(min(p, 100.0) * total / 100 + 0.5), 1) for p in percentiles]
    indexes = np.searchsorted(cumulative, targets, side="left").tolist()
    out = []
    for p, index in zip(percentiles, indexes, strict=True):
        value = h.get_value_from_index(min(index, h.counts_len - 1))
        # as the library: the top of the bucket, but the bottom for the minimum (p = 0)
        edge = h.get_highest_equivalent_value if p else h.get_lowest_equivalent_value
        out.append((p, float(edge(value))))
    return out


def encode_histogram(values_us: list[int], significant_figures: int = 3) -> str:
    """The base64 V2 compressed encoding of a histogram of these values (for tests and
    the report benchmark: the loadgen writes the real ones)."""
    h = HdrHistogram(1, 3_600_000_000, significant_figures)
    for v in values_us:
        h.record_value(max(1, int(v)))
    encoded: bytes = h.encode()
    return encoded.decode()
