"""Step results for tests that write runs without engines: the fields a native step
result must have (schema/step-result.schema.json), with a quiet host, completed by the
figures a test cares about."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from dbregress.model.records import JobId, StepResult

QUIET: dict[str, Any] = {
    "reported": True,
    "elapsed_s": 10.0,
    "q": {"op": "point_query", "unit": "ops", "count": 0, "value": 0.0},
    "ops": {},
    "server": {
        "user_s": 1.0,
        "system_s": 0.0,
        "ctx_switches": 0,
        "read_bytes": 0,
        "write_bytes": 0,
        "wall_s": 10.0,
        "io_complete": True,
        "root_alive": True,
    },
    "client": None,
    "per_op": {
        "server_cpu_us": 0.0,
        "client_cpu_us": 0.0,
        "cs": 0.0,
        "rkb": 0.0,
        "wkb": 0.0,
        "ops_per_s": 0.0,
    },
    "sla": None,
    "checks": {},
    "db_size_bytes": 0,
    "placement": {"mode": "separate", "server_cpus": [0], "client_cpus": [1]},
    "phases": {
        "setup": {"wall_s": 0.0, "server_cpu_s": None, "client_cpu_s": None},
        "warmup": {"wall_s": 0.0, "server_cpu_s": None, "client_cpu_s": None},
        "checks": {"wall_s": 0.0, "server_cpu_s": None, "client_cpu_s": None},
    },
    "window": {"warmup_s": 0.0, "measured_s": 10.0},
    "host": {
        "window_s": 10.0,
        "cpus": 2,
        "steal_s": 0.0,
        "busy_s": 1.0,
        "other_cpu_s": 0.0,
        "steal_frac": 0.0,
        "other_cpu_frac": 0.0,
        "governor": None,
        "cpu_mhz": [],
    },
    "inject_slowdown": 0.0,
}


def native(result: Mapping[str, Any]) -> StepResult:
    """A test's step dict (column, repeat, step, status and the figures it sets) as a
    schema-complete StepResult: every field it leaves out comes from QUIET (per_op and
    host are merged key by key)."""
    job = JobId(str(result["column"]), int(result["repeat"]))
    if result.get("status") == "failed":
        return StepResult.from_json({"schema_version": 1, "kind": "step", **result}, "test")
    figures = copy.deepcopy(QUIET)
    for key, value in result.items():
        if key in ("per_op", "host") and isinstance(value, dict):
            figures[key] = {**figures[key], **value}
        else:
            figures[key] = value
    return StepResult.ok(job, str(result["step"]), figures)
