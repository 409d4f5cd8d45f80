"""Typed names and records of a run's stored results.

A job is one column's repeat: its id is written `<label>/r<repeat>` (the job's folder
under the run, and the key of run.json's `jobs`). Code that needs the label or the repeat
of a job parses the id here, once, instead of splitting strings where it stands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dbregress.errors import StoreError

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
