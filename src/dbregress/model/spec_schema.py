"""The loadgen's step-spec schema (schema/step-spec.schema.json), read by the Python side
instead of keeping copies of its defaults, types and bounds.

The schema is generated from the loadgen's Rust types (`make schema`), so the Rust spec
is the one place a spec field's default and bounds are written: the lab's `[kv]` defaults
for the fields it passes on to the kv workload, and the RocksDB options a config may set, come
from here.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, TypedDict

from dbregress.model.errors import DbregressError

NAME = "step-spec.schema.json"
# An installed wheel carries it inside the package; a checkout has it at the top.
# installed (dbregress/schema), or a checkout (schema/ at its top)
PLACES = (Path(__file__).parents[1] / "schema" / NAME, Path(__file__).parents[3] / "schema" / NAME)


class Property(TypedDict, total=False):
    """One property of a spec object as the schema states it: the keywords read here."""

    type: str  # the properties read here (workload fields, engine options) have one type
    description: str
    default: Any  # a JSON value of the property's type
    minimum: float
    enum: list[str]


@functools.cache
def schema() -> dict[str, Any]:
    for path in PLACES:
        if path.is_file():
            loaded: dict[str, Any] = json.loads(path.read_text())
            return loaded
    raise DbregressError(f"the step-spec schema {NAME} is missing: run `make schema`")


def workload(kind: str) -> dict[str, Property]:
    """The properties of the spec's `workload` of this kind (`insert`, `kv`, `micro`): its
    step and its own fields."""
    for variant in schema()["properties"]["workload"]["oneOf"]:
        if variant["properties"]["kind"].get("const") == kind:
            props: dict[str, Property] = variant["properties"]
            return props
    raise DbregressError(f"the step-spec schema has no workload {kind!r}: run `make schema`")


def engine_options(driver: str) -> dict[str, Property]:
    """The properties of an engine's `options` object (driver `rocksdb`)."""
    for variant in schema()["properties"]["engine"]["oneOf"]:
        if variant["properties"]["driver"].get("const") == driver:
            props: dict[str, Property] = variant["properties"]["options"]["properties"]
            return props
    raise DbregressError(f"the step-spec schema has no engine {driver!r}: run `make schema`")


def default(props: dict[str, Property], key: str) -> Any:
    """A field's default; the schema must give one (a KeyError names the field)."""
    if "default" not in props[key]:
        raise KeyError(f"the step-spec schema gives no default for {key}")
    return props[key]["default"]
