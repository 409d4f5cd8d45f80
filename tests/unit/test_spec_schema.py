"""The Python side takes the spec's defaults, types and bounds from the generated schema
(schema/step-spec.schema.json) instead of keeping copies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dbregress.engines.rocksdb import OPTIONS, parse_options
from dbregress.lab.sizes import KvSizes
from dbregress.model import spec_schema
from dbregress.model.errors import ConfigRejected, DbregressError

SCHEMA = json.loads((Path(__file__).parents[2] / "schema" / "step-spec.schema.json").read_text())


def test_kv_defaults_are_the_specs() -> None:
    (kv,) = (
        v["properties"]
        for v in SCHEMA["properties"]["workload"]["oneOf"]
        if v["properties"]["kind"]["const"] == "kv"
    )
    assert spec_schema.workload("kv") == kv
    sizes = KvSizes()
    for key in ("key_size", "value_size", "writer_mb_per_s", "overwrite_fraction", "range_len"):
        assert getattr(sizes, key) == kv[key]["default"], key


def test_rocksdb_options_are_the_specs() -> None:
    engine = next(
        v
        for v in SCHEMA["properties"]["engine"]["oneOf"]
        if v["properties"]["driver"]["const"] == "rocksdb"
    )
    props = engine["properties"]["options"]["properties"]
    assert set(OPTIONS) == set(props)
    for key, prop in props.items():
        if "default" in prop:
            text = str(prop["default"]).lower()
            assert parse_options({key: text}, "p", "f") == {key: prop["default"]}
        if "minimum" in prop:
            with pytest.raises(ConfigRejected, match=key):
                parse_options({key: str(prop["minimum"] - 1)}, "p", "f")
        if "enum" in prop:
            with pytest.raises(ConfigRejected, match=prop["enum"][0]):
                parse_options({key: "no-such-value"}, "p", "f")


def test_a_missing_default_is_named() -> None:
    with pytest.raises(KeyError, match="keys"):
        spec_schema.default(spec_schema.workload("kv"), "keys")
    with pytest.raises(DbregressError, match="no workload 'sql'"):
        spec_schema.workload("sql")
