"""study.json, what `dbregress study run` records in the run folder beside run.json:
which study ran, how it was asked for, when, for how long and at what sizes
(docs/studies.md). Its page is written from it, run.json and verdicts.json."""

from __future__ import annotations

from typing import Literal, TypedDict

from dbregress.shapes.run import HostFacts


class StudySizes(TypedDict):
    benchmark: str
    columns: list[str]
    repeats: str
    schedule: str
    sizes: dict[str, object]  # the benchmark's sizes as the lab loader read them
    steps: list[str]


class StudyRunJson(TypedDict):
    kind: Literal["study-run"]
    format: Literal[1]
    study: str
    seed: str
    command: list[str]  # the command line as given (this machine's values in it)
    params: dict[str, str]  # the values given (this machine's: never on the page)
    scale: str
    started_at: str  # ISO 8601, UTC
    finished_at: str | None  # None: the run did not reach its report
    wall_s: float | None
    host: HostFacts
    sizes: dict[str, StudySizes]  # per comparison
