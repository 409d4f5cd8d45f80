"""schema/step-spec.schema.json is generated from the loadgen's spec types
(loadgen/src/spec.rs, `dbregress-loadgen --print-spec-schema`): the checked-in copy,
which the Python side validates its specs against, must be what the built loadgen prints."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
CHECKED_IN = ROOT / "schema" / "step-spec.schema.json"
# The workspace's own build (what `make test` builds first), not $DBREGRESS_LOADGEN's.
BINARY = ROOT / "target" / "release" / "dbregress-loadgen"


def test_the_step_spec_schema_is_the_generated_one() -> None:
    if not BINARY.is_file():
        pytest.skip(f"{BINARY} not built: run `make build`")
    printed = subprocess.run(
        [BINARY, "--print-spec-schema"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    generated = json.loads(printed)
    checked_in = json.loads(CHECKED_IN.read_text())
    assert generated == checked_in, (
        f"{CHECKED_IN.relative_to(ROOT)} is stale: the loadgen's spec types changed; "
        "run `make schema` to regenerate it from them (and commit the result)"
    )
    # what the consumers read in place: inline subschemas, the sections' own schemas
    assert "$defs" not in generated and "$ref" not in printed
    engines = generated["properties"]["engine"]["oneOf"]
    drivers = {e["properties"]["driver"]["const"] for e in engines}
    assert drivers == {"postgres", "null", "mysql", "rocksdb"}
