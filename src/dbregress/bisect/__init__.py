"""Bisection: the first build, in an ordered list, whose step differs from a good one's.

The list is the registry's versions between a good and a bad build (what `dbregress
versions` prints), a source tree's commits, or a user's ordered builds. Both ends are
built first: an end that cannot be built stops the bisection before anything else is
built. Each point is then a real run of a generated lab with three columns, the
bracket's two ends and a build between them (`lo`, `mid`, `hi`), judged by the verdict
machinery: the cost lane by default (exact counts, a few replays decide), the time lane
when asked (repeats added while undecided). The first run confirms that the ends differ
and in which direction (`slower` or `faster`); then

- `mid` differs from `lo` in that direction: the change arrived at or before `mid`
  (hi = mid); if `mid` also differs from `hi`, there is more than one change and the
  search follows the first;
- `mid` is `same` as `lo`: it arrived after `mid` (lo = mid);
- `mid` differs from `lo` the other way (it is better than the good build): it is not
  the change, which came after it (lo = mid, and later points are judged against it);
- `undecided`: the point is measured again with more replays (repeats), up to
  `attempts` times; then the bisection stops and says where, never guessing.

A build that cannot be built, fetched or started is skipped (as `git bisect skip`
does); failures in a row that share their error at builds far apart stop the bisection
with that error (building.COMMON_FAILURES). When skipped builds lie between the last good
and the first bad measured build, the answer is that the first bad build is one of
them or that first bad one, never a single build the evidence does not isolate; a
resumed bisection can be asked to measure one of them (`--try`). Every run is stored
under the bisection's folder, with bisect.json recording the request, the path taken
and the point being measured, written before the first build. A stopped bisection
(Ctrl-C, a crash, a kill) resumes from that file: the path is walked again, every point
already measured is reused, and the run of the interrupted point is resumed.
"""

from dbregress.bisect.building import COMMON_FAILURES, cause_of, probe_order
from dbregress.bisect.builds import (
    between,
    commit_of,
    commits_after,
    described,
    label_of,
    read_flavor_file,
    registry_builds,
    release_commit,
    release_tags,
    shown,
    source_builds,
)
from dbregress.bisect.model import (
    ATTEMPTS,
    BENCHMARKS,
    DIRECTIONS,
    LANES,
    BisectError,
    BisectPoint,
    BisectRequest,
    Outcome,
    Saved,
    Size,
    Verdict,
    load_state,
)
from dbregress.bisect.points import DEFAULT_SIZES, lab_text
from dbregress.bisect.walk import Bisection

__all__ = [
    "ATTEMPTS",
    "BENCHMARKS",
    "COMMON_FAILURES",
    "DEFAULT_SIZES",
    "DIRECTIONS",
    "LANES",
    "BisectError",
    "BisectPoint",
    "BisectRequest",
    "Bisection",
    "Outcome",
    "Saved",
    "Size",
    "Verdict",
    "between",
    "cause_of",
    "commit_of",
    "commits_after",
    "described",
    "lab_text",
    "label_of",
    "load_state",
    "probe_order",
    "read_flavor_file",
    "registry_builds",
    "release_commit",
    "release_tags",
    "shown",
    "source_builds",
]
