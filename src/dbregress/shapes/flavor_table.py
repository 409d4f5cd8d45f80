"""A user's compile flavor as a lab file's [flavors.FAMILY.NAME] table holds it (and a
bisection keeps it in bisect.json, patch paths made absolute): every key optional, only
its family's keys read (lab/flavors.py checks them; provision's RawRecipe is the same
table once its patches carry their digests)."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class FlavorPatchTable(TypedDict):
    """A patch of the table: its file and the versions it applies to."""

    file: str
    versions: NotRequired[str]


class FlavorTable(TypedDict, total=False):
    cc: str
    cxx: str
    build_type: str
    cflags: str
    ldflags: str
    configure: list[str]
    cmake: list[str]
    patches: list[FlavorPatchTable]
    lto: bool
    myrocks: bool


# family -> flavor name -> its table
FlavorTables = dict[str, dict[str, FlavorTable]]
