"""Typed names and records of a run's stored results.

A job is one column's repeat: its id is written `<label>/r<repeat>` (the job's folder
under the run, and the key of run.json's `jobs`). Code that needs the label or the repeat
of a job parses the id here, once, instead of splitting strings where it stands.

A step result is built once, where the step ends (the runner) or where an import reads
it, and checked against schema/step-result.schema.json before it is written; reading it
back checks it again, so a file that does not fit is named as damaged rather than read
as something it is not.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

import jsonschema

from dbregress.model.errors import StoreError
from dbregress.shapes.step_result import StepErrorJson, StepResultJson

_JOB = re.compile(r"(?P<label>.+)/r(?P<repeat>\d+)")


@dataclass(frozen=True, order=True)
class JobId:
    label: str
    repeat: int  # 0 is the discarded warm-up job

    @classmethod
    def parse(cls, text: str) -> JobId:
        m = _JOB.fullmatch(text)
        if m is None:
            raise StoreError(f"{text!r} is not a job id (<column label>/r<repeat>)")
        return cls(m["label"], int(m["repeat"]))

    @classmethod
    def of(cls, text: str) -> JobId | None:
        """The id in `text`, or None when it is not one (a foreign key in a record)."""
        m = _JOB.fullmatch(text)
        return cls(m["label"], int(m["repeat"])) if m is not None else None

    @property
    def warmup(self) -> bool:
        return self.repeat == 0

    def __str__(self) -> str:
        return f"{self.label}/r{self.repeat}"


# The stored step result's schema: packaged with the wheel, or the source tree's.
RESULT_SCHEMA = "step-result.schema.json"
SCHEMA_VERSION = 1


@functools.cache
def schema_validator(name: str) -> jsonschema.protocols.Validator:
    """The validator of one of the stored records' schemas (schema/NAME), packaged with
    the wheel or in the source tree."""
    for place in (
        Path(__file__).parents[1] / "schema" / name,  # installed: dbregress/schema
        Path(__file__).parents[3] / "schema" / name,  # a checkout: schema/ at its top
    ):
        if place.is_file():
            schema = json.loads(place.read_text())
            cls = jsonschema.validators.validator_for(schema)
            return cls(schema)
    raise StoreError(f"the schema {name} is missing from the package")


def _validator() -> jsonschema.protocols.Validator:
    return schema_validator(RESULT_SCHEMA)


@dataclass(frozen=True)
class StepError:
    type: str
    message: str
    server_log_tail: str
    traceback: str | None = None
    bug: bool | None = None  # True: a bug in dbregress (errors.is_bug), not the engine's


@dataclass(frozen=True)
class StepResult:
    """One step of one job, as stored in <label>/r<repeat>/steps/NN-<step>.json: built once
    where the step ends (or where an import reads it), checked against the step-result
    schema, and written as is. `figures` are an ok step's measured fields (Q, operations,
    resource use per operation, the window...; docs/metrics.md), `error` a failed one's."""

    job: JobId
    step: str
    status: str  # ok | failed
    figures: Mapping[str, Any] = field(default_factory=dict)
    error: StepError | None = None

    IDENTITY: ClassVar[tuple[str, ...]] = (
        "schema_version",
        "kind",
        "column",
        "repeat",
        "step",
        "status",
        "error",
    )

    @classmethod
    def ok(cls, job: JobId, step: str, figures: Mapping[str, Any]) -> StepResult:
        r = cls(job, step, "ok", {k: v for k, v in figures.items() if k not in cls.IDENTITY})
        r.check(f"step {step} of {job}")
        return r

    @classmethod
    def failed(cls, job: JobId, step: str, error: StepError) -> StepResult:
        r = cls(job, step, "failed", {}, error)
        r.check(f"step {step} of {job}")
        return r

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str) -> StepResult:
        """A stored step result; StoreError naming `where` and the first field that does
        not fit the schema."""
        _check(data, where)
        e = data.get("error")
        return cls(
            JobId(str(data["column"]), int(data["repeat"])),
            str(data["step"]),
            str(data["status"]),
            {k: v for k, v in data.items() if k not in cls.IDENTITY},
            StepError(**e) if isinstance(e, dict) else None,
        )

    def to_json(self) -> StepResultJson:
        """The stored form: the identity keys first, then the figures (the schema holds
        both to the shape, in ok() and failed())."""
        out: StepResultJson = {
            "schema_version": SCHEMA_VERSION,
            "kind": "step",
            "column": self.job.label,
            "repeat": self.job.repeat,
            "step": self.step,
            "status": cast(Literal["ok", "failed"], self.status),
        }
        if self.error is not None:
            error = {k: v for k, v in asdict(self.error).items() if v is not None}
            out["error"] = cast(StepErrorJson, error)  # traceback only when there is one
        return cast(StepResultJson, {**out, **self.figures})

    def check(self, where: str) -> None:
        _check(self.to_json(), where)

    def relabelled(self, label: str) -> StepResult:
        """The same result as a column of another name (compare's merged runs)."""
        return replace(self, job=JobId(label, self.job.repeat))

    @property
    def measured(self) -> bool:
        """Not the warm-up job's, finished ok, and reported."""
        return (
            not self.job.warmup
            and self.status == "ok"
            and self.figures.get("reported") is not False
        )

    @property
    def q(self) -> float | None:
        q = self.figures.get("q") or {}
        value = q.get("value") if isinstance(q, dict) else None
        return float(value) if value is not None else None


class NotAStepResult(StoreError):
    """A stored step result that does not fit the step-result schema."""


def _check(data: Mapping[str, Any], where: str) -> None:
    errors = sorted(_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        detail = [str(x) for x in first.absolute_path] or ["(top)"]
        # oneOf failures say little on their own: take the branch (failed, native ok,
        # imported ok) that fits the record best, the fewest complaints and not one about
        # its status, and its deepest complaint.
        branches: dict[Any, list[jsonschema.ValidationError]] = {}
        for e in first.context or []:
            branches.setdefault(e.relative_schema_path[0], []).append(e)
        fitting = [
            b for b in branches.values() if all(list(e.absolute_path) != ["status"] for e in b)
        ]
        if fitting:
            told = min(fitting, key=len)
            best = max(told, key=lambda e: len(list(e.absolute_path)))
            detail = [str(x) for x in best.absolute_path] or detail
            message = best.message
        else:
            message = first.message
        raise NotAStepResult(
            f"{where}: not a step result of schema version {SCHEMA_VERSION} "
            f"({'.'.join(detail)}: {message[:200]})"
        )
