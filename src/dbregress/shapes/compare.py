"""What `dbregress compare` sets side by side of two runs (cli/compare.py): each run's
host as far as it was recorded, and what makes the two runs unlike, as the JSON's
`compare` block says it."""

from __future__ import annotations

from typing import TypedDict


class ComparedHost(TypedDict):
    """A run's host as compare reads it from run.json `host`: its class (machine, CPU
    model, CPU count, memory in GiB), then the facts said but not judged. None: not
    recorded (an import records no host; an older run may lack a fact)."""

    machine: str | None
    cpu_model: str | None
    cpu_count: int | None
    mem_gib: int | None
    hostname: str | None
    kernel: str | None
    cpu_governor: str | None
    aslr: str | None


class LikenessJson(TypedDict):
    """The JSON's `compare` block, beside the two run ids: each list empty when alike."""

    unpaired: str | None
    method_differs: list[str]
    host_class_differs: list[str]
    host_differs: list[str]
    host_unknown: list[str]  # the sides whose host is not recorded ("A", "B")
    placement_differs: list[str]
    not_recorded: list[str]
    notes: list[str]
