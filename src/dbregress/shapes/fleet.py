"""The fleet's records: what a worker says of its host (`Fingerprint`, stored in run.json
`hosts`), the measurement identity counting replays run under (`CountIdentity`, run.json
`count_identity`), and the messages between coordinator and workers: a time-lane unit
asked for (`UnitRequest`) and what its worker sends back (`Message`, `UnitOutcome`), a
counting replay asked for (`ReplayRequest`) and its outcome (`ReplayOutcome`).

A message is a union of one TypedDict per `kind`, each with the unit, attempt and
sequence number every message carries: code narrows on `kind`."""

from __future__ import annotations

from typing import Literal, TypedDict

from dbregress.shapes.host import (
    Fingerprint,
)
from dbregress.shapes.replay import ReplayRecord
from dbregress.shapes.run import Failure, JobEntry, RunJson


class WorkerState(TypedDict):
    """A `dbregress worker`'s state in its process (fleet/unit.py WORKERS)."""

    name: str
    scratch: str
    fingerprint: Fingerprint
    warmed: set[tuple[str, str]]  # (run, comparison) whose warm-up job this host has run
    stopping: bool  # told to stop: the running unit goes elsewhere


class UnitRequest(TypedDict):
    """One unit of a lab for a worker: a round of a comparison (0: its warm-up job)."""

    topic: str  # the run's Dask event topic, which the worker's messages go to
    run: str
    unit: str
    comparison: str
    number: int
    lab_file: str
    lab_text: str
    record: RunJson  # the run's record so far, without its hosts


class MessageHeader(TypedDict):
    """What every message carries: its unit, the attempt (a fresh id each time the unit
    starts) and its number within the attempt."""

    unit: str
    attempt: str
    seq: int


class StartMessage(MessageHeader):
    kind: Literal["start"]
    jobs: list[str]
    host: str


class BuildMessage(MessageHeader):
    kind: Literal["build"]
    label: str
    identity: dict[str, str]


class JobMessage(MessageHeader):
    kind: Literal["job"]
    job: str
    info: JobEntry


class EndMessage(MessageHeader):
    kind: Literal["end"]
    job: str
    status: str
    files: dict[str, bytes]  # path in the run folder -> the file, written or grown


class FailureMessage(MessageHeader):
    kind: Literal["failure"]
    failure: Failure


class CacheMessage(MessageHeader):
    kind: Literal["cache"]
    failure: str | None  # None: the page cache was dropped


class StepMessage(MessageHeader):
    kind: Literal["step"]
    job: str
    index: int
    result: str  # the step result's path in the run folder
    files: dict[str, bytes]


Message = (
    StartMessage
    | BuildMessage
    | JobMessage
    | EndMessage
    | FailureMessage
    | CacheMessage
    | StepMessage
)


class UnitOutcome(TypedDict):
    """What a unit's task returns: every message it sent, in order."""

    unit: str
    attempt: str
    host: str
    messages: list[Message]
    started: float  # the worker's clock (time.time())
    ended: float


class ReplayOutcome(TypedDict):
    """A replay's record and its files (path in the run folder -> content)."""

    record: ReplayRecord
    files: dict[str, bytes]
