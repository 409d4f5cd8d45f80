"""The fault suite, one case per kind of fault at a random point (tests/faults.py).

The seed is drawn per run and printed in every failure; rerun one with
DBREGRESS_FAULT_SEED=<seed>. bench/fault_suite.py runs many seeds per kind.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from tests.faults import KINDS, run_case

pytestmark = pytest.mark.engine
SEED = int(os.environ.get("DBREGRESS_FAULT_SEED") or random.SystemRandom().randrange(10**6))


@pytest.mark.parametrize("kind", KINDS)
def test_fault(kind: str, tmp_path: Path) -> None:
    if os.geteuid() != 0 and kind.endswith("disk-full"):
        pytest.skip("mounting a small tmpfs needs root")
    root = Path("/var/tmp") / f"dbregress-faults-{os.getpid()}-{kind}"
    try:
        out = run_case(kind, SEED, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    where = f"{kind}, seed {SEED} (DBREGRESS_FAULT_SEED={SEED}), fault at {out.point}"
    assert out.ok, f"{where}: {out.problems}"
    assert out.found_after == out.finished_before, where
    assert not out.orphans and out.recorded and out.went_on, where
