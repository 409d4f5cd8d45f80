"""What a reader of the HTML report needs to run the lab again, as the page lists it:
the host, the placement, the run's facts, each column's build and config, the lab file
itself and the commands.

Apart from html.py because it reads run.json and the lab file only, not the verdicts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TypedDict, cast

from dbregress.model.records import JobId
from dbregress.store.run import RunData


class Reproduce(TypedDict):
    """What a reader needs to run this again, as the page lists it."""

    host: list[tuple[str, str]]
    placement: list[tuple[str, str]]
    run: list[tuple[str, str]]
    builds: list[list[str]]
    configs: list[list[str]]
    lab: str
    commands: list[str]


def _text(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _repeats(value: object) -> str | None:
    if isinstance(value, dict) and "min" in value:
        low, high = value["min"], value.get("max", value["min"])
        return f"{low}..{high} (more rounds while a step is undecided)" if high != low else str(low)
    return None if value is None else _text(value)


def _settings(settings: Mapping[str, object]) -> str:
    """An engine's or a job's settings, whatever they hold, as name=value."""
    return ", ".join(f"{k}={v}" for k, v in settings.items()) or "-"


def reproduce(data: RunData) -> Reproduce:
    """What a reader needs to run this again: host, placement, builds, configs, lab."""
    record = data.record  # run.json, as read and checked against its schema
    lab = data.path / "lab.toml"
    try:
        lab_text = lab.read_text()
    except OSError:
        lab_text = "(lab.toml is missing from the run folder)"
    builds = []
    for c in record["columns"]:
        b = record.get("builds", {}).get(c["label"], {})
        rest = {k: val for k, val in b.items() if k not in ("spec", "version_string")}
        builds.append([c["label"], c["build"], b.get("version_string", "?"), _settings(rest)])
    configs = []
    for c in record["columns"]:
        jobs = [
            j
            for name, j in sorted(record.get("jobs", {}).items())
            if (jid := JobId.of(name)) is not None and jid.label == c["label"]
        ]
        # a job's entry holds its settings and sizes, keys shapes/run.py does not name yet
        first = cast(Mapping[str, Mapping[str, object]], jobs[0] if jobs else {})
        configs.append(
            [
                c["label"] + (" (base)" if c["base"] else ""),
                c["comparison"],
                c["config"],
                _settings(c.get("settings") or {}),
                _settings(first.get("settings") or {}),
                _settings(first.get("sizes") or {}),
            ]
        )
    run_facts = [
        ("run id", record["run_id"]),
        ("status", record["status"]),
        ("started", record.get("started_at")),
        ("finished", record.get("finished_at")),
        ("resumed", record.get("resumed_at")),
        ("repeats", _repeats(record.get("repeats"))),
        ("order of columns in a round", record.get("order")),
        ("seed", record.get("seed")),
        ("warm-up job", record.get("warmup_job")),
        ("verdict policy", record.get("verdict_policy")),
        ("method", record.get("method_identity")),
        ("page cache drops", record.get("page_cache")),
        ("injected slowdowns", record.get("inject_slowdown") or None),
    ]
    specs = sorted({c["build"] for c in record["columns"]})
    return {
        "host": [(k, _text(val)) for k, val in record.get("host", {}).items()],
        "placement": [(k, _text(val)) for k, val in record["placement"].items()],
        "run": [(k, _text(val)) for k, val in run_facts if val is not None],
        "builds": builds,
        "configs": configs,
        "lab": lab_text,
        "commands": [f"dbregress fetch {' '.join(specs)}", "dbregress run lab.toml"],
    }
