"""Fuzzing of every input a user writes (issue 9): a lab file, and the config profiles
and settings its columns name, either load or fail with a DbregressError whose message
names the file, the key and what to fix; never any other exception.

The strategies here are also what bench/fuzz_inputs.py draws its 10,000+ cases from.
Loading must not touch the network or start a process (no build is fetched): the tests
run with sockets and subprocesses disabled.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime as dt
import json
import math
import random
import re
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbregress import configs
from dbregress.engines.base import Sizes
from dbregress.lab.columns import LABEL_RE
from dbregress.lab.file import Lab, load_lab
from dbregress.lab.micro_names import GROUPS
from dbregress.lab.sizes import INSERT_STEPS, KV_STEPS
from dbregress.model.errors import DbregressError

MICRO_NAMES = [name for names in GROUPS.values() for name in names]
SQL_BUILDS = [
    "postgres@12.20.0",
    "postgres@17.2",
    "postgres@system",
    "postgres@/opt/pg17",
    "mariadb@11.4.5",
    "mariadb@system",
    "mysql@/opt/mysql-8.4",
]
ROCKSDB_BUILDS = [
    "rocksdb@7.10.2",
    "rocksdb@10.2.1",
    "rocksdb@system",
    "rocksdb@/opt/librocksdb.so",
]
BAD_BUILDS = [
    "postgres@",
    "@17.2",
    "@",
    "nosuch@1",
    "postgres@99.99.99",
    "postgres17",
    "postgres@@1",
    "postgres@1@2",
    "Postgres@17.2",
    "postgres@~nosuchuser/x",
    "rocksdb@./librocksdb.so",
    "postgres@.\x00",
    "postgres@\n17.2",
    "postgres@" + "a/" * 300,
    "mysql@",
    "rocksdb@not-a-version",
]
FILENAMES = ["lab.toml", "my-lab.toml", "x.toml", "lab with space.toml", "ünï.toml", "-dash.toml"]

# -- TOML out of Python values ---------------------------------------------------------

BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def toml_string(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_key(key: str) -> str:
    return key if BARE_KEY.fullmatch(key) else toml_string(key)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        pairs = ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items())
        return "{ " + pairs + " }" if pairs else "{}"
    raise TypeError(type(value))


def dump(doc: dict[str, Any], rnd: random.Random) -> str:
    """TOML text of `doc`; tables become [sections] or inline tables at random."""
    return "\n".join(_emit(doc, [], rnd)) + "\n"


def _emit(table: dict[str, Any], prefix: list[str], rnd: random.Random) -> list[str]:
    lines: list[str] = []
    later: list[tuple[str, str, Any]] = []
    for key, value in table.items():
        if isinstance(value, dict) and value and rnd.random() < 0.7:
            later.append(("table", key, value))
        elif (
            isinstance(value, list)
            and value
            and all(isinstance(v, dict) for v in value)
            and rnd.random() < 0.85
        ):
            later.append(("array", key, value))
        else:
            lines.append(f"{toml_key(key)} = {toml_value(value)}")
    for kind, key, value in later:
        path = [*prefix, toml_key(key)]
        items = [value] if kind == "table" else value
        for item in items:
            header = f"[{'.'.join(path)}]" if kind == "table" else f"[[{'.'.join(path)}]]"
            lines += ["", header, *_emit(item, path, rnd)]
    return lines


# -- values a user might write ---------------------------------------------------------

SCALARS = st.one_of(
    st.sampled_from(
        [
            0,
            -1,
            1,
            2**63 - 1,
            2**63,
            -(2**63) - 1,
            10**30,
            0.0,
            -0.0,
            1e308,
            5e-324,
            math.nan,
            math.inf,
            -math.inf,
            True,
            False,
            "",
            " ",
            "\t",
            "\n",
            "\x00",
            "0",
            "-1",
            "nan",
            "é",
            "😀",
            "a" * 300,
            "l.i0",
            "default",
            "postgres@17.2",
            "{cache_mb}",
            "[]",
        ]
    ),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.booleans(),
    st.sampled_from(
        [
            dt.date(1979, 5, 27),
            dt.time(7, 32),
            dt.datetime(1979, 5, 27, 7, 32),
            dt.datetime(1979, 5, 27, 7, 32, tzinfo=dt.UTC),
        ]
    ),
)
NASTY = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=4),
    st.dictionaries(st.text(max_size=6), SCALARS, max_size=3),
    st.lists(st.dictionaries(st.text(max_size=6), SCALARS, max_size=2), min_size=1, max_size=2),
)
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.sampled_from([0, -1, 0.0, -0.0, 1e-300, 1e6, 1e6 + 1, 2**53, 2**53 + 1, 1001, 10**30]),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e300, -1e300, 2**63 - 1, 2**63]),
)
CPU_LISTS = st.one_of(
    st.text(alphabet="0123456789-, x", max_size=12),
    st.sampled_from(["0", "0-1", "1-0", "0-99999999", "99999", "65536", "0,0", "", "-1", "0-"]),
)
LABELISH = st.one_of(
    st.text(max_size=70),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,70}", fullmatch=True),
    st.sampled_from(["", ".", "..", "a/b", "a b", "ok\n", "x" * 65, "-a", "é", "c0", "c1"]),
)
ALL_PROFILES = sorted({p for f in ("postgres", "mysql", "rocksdb") for p in configs.profiles(f)})
SETTING_KEYS = st.one_of(
    st.text(max_size=10),
    st.sampled_from(
        [
            *("work_mem", "cache_type", "bloom_bits", "block_size", "direct_io", "cache_mb"),
            *("block_align", "estimated_entry_charge", "a.b", "-x", "x\ty", "innodb-log"),
            *("", "x y"),
        ]
    ),
)
SETTING_VALUES = st.one_of(
    SCALARS,
    st.sampled_from(["lru", "hyper_clock", "lz4", "on", "1e400", "9" * 400, "-1", "a\nb", "1_0"]),
)
SPECIFIC: dict[str, st.SearchStrategy[Any]] = {
    "build": st.one_of(
        st.sampled_from(BAD_BUILDS + SQL_BUILDS + ROCKSDB_BUILDS),
        st.text(alphabet="postgresrockdbmyql@0123456789./~_- ", max_size=20),
    ),
    "repeats": st.one_of(
        st.integers(min_value=-5, max_value=2000),
        st.text(alphabet="0123456789. x-", max_size=10),
        st.sampled_from(
            ["6..4", "x..y", "3..10", "0..3", "1..1001", "1000", " 5 ", "\u0663..\u0665", "\u00b2"]
        ),
        st.just("1" * 5000),
    ),
    "label": LABELISH,
    "name": LABELISH,
    "placement": st.one_of(
        st.sampled_from(["same", "separate", "unpinned", "diagonal", "", "SAME"]),
        st.fixed_dictionaries({"server": CPU_LISTS, "client": CPU_LISTS}),
    ),
    "server": CPU_LISTS,
    "client": CPU_LISTS,
    "steps": st.lists(
        st.one_of(st.sampled_from([*INSERT_STEPS, *KV_STEPS, "x", ""]), SCALARS), max_size=12
    ),
    "only": st.lists(st.one_of(st.sampled_from([*MICRO_NAMES, "x"]), SCALARS), max_size=6),
    "order": st.sampled_from(["random", "fixed", "sorted", ""]),
    "benchmark": st.sampled_from(["insert", "kv", "micro", "ycsb", "", "KV"]),
    "config": st.one_of(
        st.sampled_from(ALL_PROFILES),
        st.sampled_from(["../mysql/default", "", "nope", "default.conf", "/etc/passwd", "x\x00"]),
        st.just("a" * 300),
    ),
    "settings": st.dictionaries(SETTING_KEYS, SETTING_VALUES, max_size=3),
    "verdict": st.dictionaries(st.sampled_from(["alpha", "band", "alphaa"]), NUMBERS, max_size=2),
    "seed": NUMBERS,
}


BOUNDARY = st.sampled_from(
    [math.nan, math.inf, -math.inf, -1, 0, -0.0, 2**63, 10**30, 1e300, "", True, [], {}]
)


def values_for(key: str) -> st.SearchStrategy[Any]:
    specific = SPECIFIC.get(key, NUMBERS)
    return st.one_of(specific, specific, BOUNDARY, NASTY)


# -- valid labs ------------------------------------------------------------------------

FINITE = {"allow_nan": False, "allow_infinity": False}


def _steps(known: tuple[str, ...]) -> st.SearchStrategy[list[str]]:
    rest = st.lists(st.sampled_from(known[1:]), unique=True)
    return rest.map(lambda r: [known[0], *sorted(r, key=known.index)])


SIZES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "insert": st.fixed_dictionaries(
        {},
        optional={
            "clients": st.integers(1, 4),
            "load_rows": st.integers(1, 10**6),
            "write_rows": st.integers(4, 10**6),
            "query_seconds": st.floats(0.5, 100, **FINITE),
            "cleanup_wait_s": st.floats(0, 10, **FINITE),
            "warmup_s": st.integers(0, 10),
            "steps": _steps(INSERT_STEPS),
        },
    ),
    "kv": st.fixed_dictionaries(
        {},
        optional={
            "keys": st.integers(1, 10**6),
            "key_size": st.integers(8, 64),
            "value_size": st.integers(1, 1000),
            "threads": st.integers(1, 4),
            "seconds": st.integers(1, 60),
            "short_seconds": st.floats(0.1, 10, **FINITE),
            "writer_mb_per_s": st.floats(0, 10, **FINITE),
            "overwrite_fraction": st.floats(0.01, 1, **FINITE),
            "range_len": st.integers(1, 100),
            "warmup_s": st.floats(0, 5, **FINITE),
            "steps": _steps(KV_STEPS),
        },
    ),
    "micro": st.fixed_dictionaries(
        {},
        optional={
            "tables": st.integers(1, 8),
            "rows": st.integers(1, 10**6),
            "clients": st.integers(1, 4),
            "seconds": st.floats(0.5, 60, **FINITE),
            "reads_before_writes": st.booleans(),
            "cleanup_wait_s": st.integers(0, 20),
            "only": st.lists(st.sampled_from(MICRO_NAMES), unique=True, max_size=4),
            "warmup_s": st.integers(0, 5),
        },
    ),
}
SQL_SETTINGS = st.dictionaries(
    st.sampled_from(["work_mem", "max_connections", "fsync", "innodb-io-capacity", "a.b_c"]),
    st.one_of(
        st.text(alphabet="abcXYZ019 ._-'#", max_size=10),
        st.integers(0, 10**6),
        st.booleans(),
        st.floats(0, 100, **FINITE),
    ),
    max_size=3,
)
ROCKSDB_SETTINGS = st.fixed_dictionaries(
    {},
    optional={
        "cache_type": st.sampled_from(["lru", "hyper_clock", "auto_hyper_clock"]),
        "bloom_bits": st.one_of(st.integers(0, 20), st.floats(0, 20, **FINITE)),
        "compression": st.sampled_from(["none", "lz4"]),
        "direct_io": st.one_of(st.booleans(), st.sampled_from(["on", "off", "yes", "0"])),
        "block_size": st.integers(512, 65536),
        "write_buffer_mb": st.integers(1, 128),
    },
)


@st.composite
def columns(draw: st.DrawFn, builds: list[str], first: int) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(1, 3))):
        build = draw(st.sampled_from(builds))
        family = configs.family_of(build.partition("@")[0])
        column: dict[str, Any] = {
            "label": f"{draw(st.sampled_from(['pg', 'B.2', 'x_y', '0']))}-{first + i}"
        }
        column["build"] = build
        if draw(st.booleans()):
            column["config"] = draw(st.sampled_from(configs.profiles(family)))
        if draw(st.booleans()):
            column["settings"] = draw(ROCKSDB_SETTINGS if family == "rocksdb" else SQL_SETTINGS)
        if draw(st.integers(0, 4)) == 0:
            column["inject_slowdown"] = draw(st.floats(0, 10, **FINITE))
        out.append(column)
    return out


@st.composite
def comparison_body(draw: st.DrawFn, first: int) -> dict[str, Any]:
    benchmark = draw(st.sampled_from(["insert", "kv", "micro"]))
    body: dict[str, Any] = {}
    if benchmark != "insert" or draw(st.booleans()):
        body["benchmark"] = benchmark
    body["column"] = draw(columns(ROCKSDB_BUILDS if benchmark == "kv" else SQL_BUILDS, first))
    if draw(st.booleans()):
        body[benchmark] = draw(SIZES[benchmark])
    return body


TOP = st.fixed_dictionaries(
    {},
    optional={
        "placement": st.one_of(
            st.sampled_from(["same", "separate", "unpinned"]),
            st.fixed_dictionaries({"server": st.just("0"), "client": st.just("0")}),
        ),
        "repeats": st.one_of(
            st.integers(1, 10),
            st.tuples(st.integers(1, 5), st.integers(0, 5)).map(lambda t: f"{t[0]}..{t[0] + t[1]}"),
        ),
        "order": st.sampled_from(["random", "fixed"]),
        "warmup_job": st.booleans(),
        "drop_caches": st.booleans(),
        "sleep_between_s": st.floats(0, 5, **FINITE),
        "step_timeout_s": st.integers(1, 1000),
        "seed": st.integers(0, 10**6),
        "verdict": st.fixed_dictionaries(
            {},
            optional={
                "alpha": st.floats(0.001, 0.49, **FINITE),
                "band": st.floats(0.001, 0.99, **FINITE),
            },
        ),
    },
)


@st.composite
def lab_docs(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A file name and a valid lab, in the single or the [[comparison]] form."""
    filename = draw(st.sampled_from(FILENAMES))
    doc: dict[str, Any] = {}
    if not LABEL_RE.fullmatch(Path(filename).stem) or draw(st.booleans()):
        doc["name"] = draw(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True))
    doc.update(draw(TOP))
    if draw(st.booleans()):
        doc["comparison"] = [
            {"name": f"c{i}", **draw(comparison_body(10 * i))}
            for i in range(draw(st.integers(1, 3)))
        ]
    else:
        doc.update(draw(comparison_body(0)))
    return filename, doc


# -- mutations -------------------------------------------------------------------------

KEYS = {
    kind: keys.split()
    for kind, keys in {
        "top": "name placement repeats order warmup_job drop_caches sleep_between_s "
        "step_timeout_s seed verdict comparison column benchmark insert kv micro",
        "comparison": "name benchmark column insert kv micro",
        "column": "label build config settings inject_slowdown",
        "insert": "clients load_rows write_rows query_seconds cleanup_wait_s warmup_s steps",
        "kv": "keys key_size value_size threads seconds short_seconds writer_mb_per_s "
        "overwrite_fraction range_len warmup_s steps",
        "micro": "tables rows clients seconds reads_before_writes cleanup_wait_s only warmup_s",
        "verdict": "alpha band",
        "placement": "server client",
        "settings": "work_mem cache_type bloom_bits direct_io",
    }.items()
}
# A mutation of the key on the left may be reported at a key on the right instead: a new
# build's family rejects the column's config or settings, a new benchmark the sizes table
# of the old one, a [[comparison]] the top-level column keys.
RELATED = {
    "build": {"config", "settings"},
    "benchmark": {"insert", "kv", "micro", "name"},
    "comparison": {"column", "benchmark", "insert", "kv", "micro"},
    "column": {"label"},
}


def tables(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every table of a lab with its kind (top, comparison, column, insert, ...)."""
    found: list[tuple[str, dict[str, Any]]] = [("top", doc)]
    for _, table in found:
        for key, value in list(table.items()):
            child = key if key in KEYS and key != "top" else "other"
            if isinstance(value, dict):
                found.append((child, value))
            elif isinstance(value, list):
                found += [(child, v) for v in value if isinstance(v, dict)]
        if len(found) > 50:
            break
    return found


@st.composite
def mutate(draw: st.DrawFn, doc: dict[str, Any]) -> set[str]:
    """Change `doc` in place in one way; the keys an error should name."""
    where = tables(doc)
    kind, table = draw(st.sampled_from(where))
    op = draw(st.sampled_from(["set", "set", "set", "delete", "unknown", "entry", "twin"]))
    arrays = [(k, v) for _, t in where for k, v in t.items() if k in ("column", "comparison")]
    arrays = [(k, v) for k, v in arrays if isinstance(v, list) and v]
    if op == "entry" and arrays:  # an entry of [[column]] or [[comparison]] is not a table
        key, items = draw(st.sampled_from(arrays))
        items[draw(st.integers(0, len(items) - 1))] = draw(SCALARS)
        return {key}
    if op == "twin" and arrays:  # a column (or comparison) twice: its labels are not unique
        key, items = draw(st.sampled_from(arrays))
        items.append(copy.deepcopy(draw(st.sampled_from(items))))
        return {key, "label", "name"}
    if op == "delete" and table:
        key = draw(st.sampled_from(sorted(table)))
        del table[key]
    else:
        if op == "unknown":
            key = draw(st.one_of(st.text(max_size=12), st.sampled_from(["Label", "clientz"])))
        else:
            key = draw(st.sampled_from(KEYS.get(kind) or ["x"]))
        table[key] = draw(values_for(key))
    return {key, "settings"} if kind == "settings" else {key}


# -- cases -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One input: a lab file's name and content, or a config profile to render."""

    kind: str  # valid, mutated, text, bytes, soup, tree, profile, profile-name
    filename: str
    content: str | bytes
    keys: frozenset[str] = frozenset()  # keys a mutation touched: an error names one
    family: str = ""  # profile-name cases: the engine family

    def show(self) -> str:
        shown = self.content if len(self.content) < 600 else self.content[:600]
        return f"[{self.kind}] {self.filename} keys={sorted(self.keys)}\n{shown!r}"


@st.composite
def valid_labs(draw: st.DrawFn) -> Case:
    filename, doc = draw(lab_docs())
    return Case("valid", filename, dump(doc, draw(st.randoms(use_true_random=False))))


@st.composite
def mutated_labs(draw: st.DrawFn) -> Case:
    filename, doc = draw(lab_docs())
    doc = copy.deepcopy(doc)  # mutated in place: never a value a strategy may share
    keys: set[str] = set()
    for _ in range(draw(st.integers(1, 3))):
        keys |= draw(mutate(doc))
    text = dump(doc, draw(st.randoms(use_true_random=False)))
    return Case("mutated", filename, text, frozenset(keys))


SOUP_LINES = [
    "[[column]]",
    "[column]",
    "[[comparison]]",
    "[comparison]",
    "[[comparison.column]]",
    "[comparison.insert]",
    "[comparison.kv]",
    "[comparison.micro]",
    "[[comparison.insert]]",
    "[insert]",
    "[[insert]]",
    "[kv]",
    "[micro]",
    "[verdict]",
    "[placement]",
    "[column.settings]",
    "[[column.settings]]",
    'label = "a"',
    'label = "b"',
    'build = "postgres@17.2"',
    'build = "rocksdb@10.2.1"',
    'build = "mariadb@11.4.5"',
    'benchmark = "kv"',
    'benchmark = "micro"',
    'name = "x"',
    "settings = { a = 1 }",
    'settings = { cache_type = "lru", bloom_bits = 1e400 }',
    'server = "0"',
    'client = "0-1"',
    'steps = ["l.i0"]',
    'steps = ["fillseq", "fillseq"]',
    'only = ["scan"]',
    'repeats = "3..10"',
    'placement = "same"',
    "alpha = 0.01",
    "column = []",
    "comparison = []",
    "comparison = [1]",
    "column = [[]]",
    "x = " + "[" * 2000 + "]" * 2000,
    "seed = " + "9" * 5000,
    "\ufeff",
    "# comment",
    "",
]
SOUP_KEYS = [k for keys in KEYS.values() for k in keys] + ["x", '"a.b"', "a.b", "label.x"]
SOUP_VALUES = [toml_value(v) for v in [0, -1, 1.5, "", "x", True, [], {}, [1, "a"], 2**64]]
SOUP_VALUES += ["nan", "inf", "-inf", "1979-05-27", "07:32:00", "{ server = '0' }", '"""a"""']


@st.composite
def soups(draw: st.DrawFn) -> Case:
    """Lab-shaped lines in any order: headers, keys and values that belong elsewhere."""
    line = st.one_of(
        st.sampled_from(SOUP_LINES),
        st.builds(
            lambda k, v: f"{k} = {v}", st.sampled_from(SOUP_KEYS), st.sampled_from(SOUP_VALUES)
        ),
    )
    lines = draw(st.lists(line, max_size=25))
    return Case("soup", draw(st.sampled_from(FILENAMES)), "\n".join(lines) + "\n")


SHIPPED_LINES = sorted(
    {
        line
        for family in ("postgres", "mysql", "rocksdb")
        for path in (configs.CONFIG_ROOT / family).glob("*.conf")
        for line in path.read_text().splitlines()
    }
)
FIELD_TOKENS = [
    "{cache_mb}",
    "{wal_mb}M",
    "{data_mb:x1.5,min64}",
    "{data_mb:x1e400}",
    "{data_mb:x1e308,x10}",
    "{data_mb:xnan}",
    "{data_mb:x-1}",
    "{data_mb:max-5}",
    "{data_mb:min1e999}",
    "{cache_mb.real}",
    "{cache_mb[0]}",
    "{cache_mb.__class__}",
    "{0}",
    "{}",
    "{",
    "}",
    "{{",
    "}}",
    "{nosuch}",
    "{data_mb:{cache_mb}}",
    "{cache_mb!r}",
    "{data_mb:times2}",
    "{data_mb:x}",
    "{data_mb:,,}",
    "'quoted'",
    "a = b = c",
    "# {broken",
]


@st.composite
def profiles(draw: st.DrawFn) -> Case:
    """The text of a config profile: shipped lines, size fields good and bad, noise."""
    line = st.one_of(
        st.sampled_from(SHIPPED_LINES),
        st.builds(
            lambda k, t: f"{k} = {t}",
            st.sampled_from(["cache_mb", "shared_buffers", "x"]),
            st.sampled_from(FIELD_TOKENS),
        ),
        st.sampled_from(FIELD_TOKENS),
        st.text(max_size=30),
    )
    text = "\n".join(draw(st.lists(line, max_size=12)))
    return Case("profile", "fuzz.conf", text)


@st.composite
def profile_names(draw: st.DrawFn) -> Case:
    family = draw(st.sampled_from(["postgres", "mysql", "rocksdb", "mariadb", "../..", ""]))
    name = draw(
        st.one_of(
            st.sampled_from([*ALL_PROFILES, "../postgres/default", "", "a" * 300, "x\x00", "*"]),
            st.text(max_size=20),
        )
    )
    return Case("profile-name", "", name, family=family)


LAB_KEYS = sorted({k for keys in KEYS.values() for k in keys})
TREE_VALUES = st.one_of(SCALARS, *(v for k, v in SPECIFIC.items() if k != "settings"))


@st.composite
def trees(draw: st.DrawFn) -> Case:
    """Any document of lab keys: tables, lists and values wherever they may or may not go."""
    tree = st.recursive(
        TREE_VALUES,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.sampled_from(LAB_KEYS), inner, max_size=4),
        ),
        max_leaves=16,
    )
    doc = draw(st.dictionaries(st.sampled_from(LAB_KEYS), tree, min_size=1, max_size=6))
    return Case("tree", "lab.toml", dump(doc, draw(st.randoms(use_true_random=False))))


def cases() -> st.SearchStrategy[Case]:
    return st.one_of(
        mutated_labs(),
        mutated_labs(),
        mutated_labs(),
        valid_labs(),
        soups(),
        trees(),
        st.builds(
            lambda t, f: Case("text", f, t), st.text(max_size=300), st.sampled_from(FILENAMES)
        ),
        st.builds(lambda b: Case("bytes", "lab.toml", b), st.binary(max_size=300)),
        profiles(),
        profile_names(),
    )


# -- running a case --------------------------------------------------------------------

SIZES_FOR_PROFILES = st.builds(
    Sizes,
    cache_mb=st.integers(0, 2**40),
    wal_mb=st.integers(0, 2**40),
    data_mb=st.integers(0, 2**40),
)
KEYED = re.compile(r"(?P<line>\d+): (?P<dotted>.+?): (?P<what>.+)", re.S)


def run_case(case: Case, directory: Path) -> tuple[str, str]:
    """("loaded" | "error", "") when the outcome is allowed; ("bad-error" | "other", why)
    when not: an exception that is not a DbregressError, or one whose message does not
    name the file or the key."""
    if case.kind == "profile-name":
        try:
            configs.render(case.family, str(case.content), Sizes(128, 1024, 10), {})
        except DbregressError:
            return "error", ""
        except Exception as e:
            return "other", f"{type(e).__name__}: {e}"
        return "loaded", ""
    path = directory / case.filename
    if case.kind == "profile":
        try:
            configs.render_text(path, str(case.content), Sizes(128, 1024, 10))
        except DbregressError as e:
            ok = str(path) in str(e)
            return ("error", "") if ok else ("bad-error", f"does not name the file: {e}")
        except Exception as e:
            return "other", f"{type(e).__name__}: {e}"
        return "loaded", ""
    if isinstance(case.content, bytes):
        path.write_bytes(case.content)
    else:
        path.write_bytes(case.content.encode("utf-8", "surrogatepass"))
    try:
        lab = load_lab(path)
    except DbregressError as e:
        why = _bad_message(str(e), path, case.keys)
        return ("bad-error", why) if why else ("error", "")
    except Exception as e:
        return "other", f"{type(e).__name__}: {str(e)[:300]}"
    try:
        _use(lab)
    except Exception as e:
        return "other", f"loaded, then unusable: {type(e).__name__}: {str(e)[:300]}"
    return "loaded", ""


def _bad_message(message: str, path: Path, keys: frozenset[str]) -> str:
    """Why an error message does not do its job, or ""."""
    where = str(path)
    if not message.startswith(where) and f"lab file {where}" not in message:
        return f"does not start with the file name: {message[:300]}"
    rest = message.removeprefix(where).removeprefix(":")
    if rest.startswith(" not valid TOML") or re.match(r"\d+: not (UTF-8|valid TOML)", rest):
        return ""  # not TOML: the line (from tomllib) is all there is to name
    m = KEYED.fullmatch(rest)
    if not m or len(m["what"]) < 10:
        return f"does not name a key and what to fix: {message[:300]}"
    named = set(keys).union(*(RELATED.get(k, ()) for k in keys))
    if keys and not any(k in message or repr(k) in message for k in named):
        return f"names none of the mutated keys {sorted(keys)}: {message[:300]}"
    return ""


def _use(lab: Lab) -> None:
    """What the runner and the store do first with a lab, and what a loaded lab must be:
    numbers finite and not negative, names usable as folder names, known config profiles.
    A lab that loads but breaks any of this is a bug like a traceback."""
    lab.jobs()
    str(lab.repeats)
    json.dumps(lab.placement.to_json(), allow_nan=False)
    numbers = [
        lab.sleep_between_s,
        lab.step_timeout_s or 1.0,
        lab.seed,
        lab.repeats.minimum,
        *vars(lab.verdict).values(),
    ]
    names = [lab.name]
    for comparison in lab.comparisons:
        names.append(comparison.name)
        numbers += [v for v in vars(comparison.sizes).values() if isinstance(v, (int, float))]
        for c in comparison.columns:
            numbers.append(c.inject_slowdown)
            names.append(c.label)
            if c.config not in configs.profiles(configs.family_of(c.build.engine)):
                raise ValueError(f"a loaded lab has the config {c.config!r}")
        json.dumps([dataclasses.asdict(c) | {"build": str(c.build)} for c in comparison.columns])
    for number in numbers:
        if not math.isfinite(number) or not 0 <= number < 2**63:
            raise ValueError(f"a loaded lab has the number {number}")
    for name in names:
        if not LABEL_RE.fullmatch(name):
            raise ValueError(f"a loaded lab has the name {name!r}")


# -- the tests -------------------------------------------------------------------------


@contextlib.contextmanager
def no_network_no_processes() -> Iterator[None]:
    """No socket connects and no process starts meanwhile (an input's load must not fetch
    a build or ask a registry); trying is an AssertionError, which no case may raise."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"loading an input tried to reach out: {args[:2]}")

    with (
        mock.patch.object(socket.socket, "connect", refuse),
        mock.patch.object(socket, "create_connection", refuse),
        mock.patch.object(subprocess, "Popen", refuse),
    ):
        yield


@pytest.fixture(scope="module")
def offline() -> Iterator[None]:
    with no_network_no_processes():
        yield


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def check(case: Case, directory: Path) -> str:
    outcome, why = run_case(case, directory)
    assert outcome in ("loaded", "error"), f"{outcome}: {why}\n{case.show()}"
    return outcome


@FUZZ
@given(case=valid_labs())
def test_valid_labs_load(case: Case, offline: None, workdir: Path) -> None:
    assert check(case, workdir) == "loaded", case.show()


@FUZZ
@given(case=mutated_labs())
def test_mutated_labs_load_or_name_file_and_key(case: Case, offline: None, workdir: Path) -> None:
    check(case, workdir)


@settings(FUZZ, max_examples=120)
@given(
    case=st.one_of(soups(), trees(), st.builds(lambda t: Case("text", "lab.toml", t), st.text()))
)
def test_any_text_loads_or_names_the_file(case: Case, offline: None, workdir: Path) -> None:
    check(case, workdir)


@settings(FUZZ, max_examples=40)
@given(case=st.builds(lambda b: Case("bytes", "lab.toml", b), st.binary(max_size=200)))
def test_any_bytes_load_or_name_the_file(case: Case, offline: None, workdir: Path) -> None:
    check(case, workdir)


@settings(FUZZ, max_examples=80)
@given(case=st.one_of(profiles(), profile_names()), sizes=SIZES_FOR_PROFILES)
def test_config_profiles_render_or_name_the_file(
    case: Case, sizes: Sizes, offline: None, workdir: Path
) -> None:
    check(case, workdir)
    if case.kind == "profile":  # any sizes, not just the ones run_case uses
        try:
            rendered = configs.render_text(workdir / "fuzz.conf", str(case.content), sizes)
        except DbregressError as e:
            assert "fuzz.conf" in str(e)
        else:
            assert all(isinstance(v, str) for v in rendered.values())


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("seed = " + "9" * 5000, r"lab.toml:1: not valid TOML: .*thousands of digits"),
        ("x = " + "[" * 5000 + "]" * 5000, "lab.toml: not valid TOML: .*nested too deeply"),
        ("sleep_between_s = " + "9" * 30, "lab.toml:1: sleep_between_s: an integer out of range"),
        ("step_timeout_s = nan", "lab.toml:1: step_timeout_s: nan is not allowed"),
        ("sleep_between_s = -1", "sleep_between_s: must be 0 or more"),
        ("sleep_between_s = 1e300", "sleep_between_s: .*at most 1000000"),
        ("seed = -1", "seed: must be 0 or more"),
        ("repeats = 10000", "repeats: must be greater than 0 and at most 1000"),
        ('repeats = "' + "1" * 5000 + '"', r"repeats: '1111.*\.\.\. is neither a number"),
        ('name = "abc\\n"', r"name: 'abc\\n' must be"),
        ("comparison = []", "comparison: a lab needs at least one"),
        ("comparison = [1]", r"comparison: entry 0 is an integer"),
        ('placement = { server = "0-99999999", client = "0" }', "placement.server: .*CPU list"),
        ('placement = { server = "1-0", client = "0" }', "placement.server: .*backwards"),
    ],
)
def test_fuzz_findings(tmp_path: Path, text: str, expect: str) -> None:
    """Inputs the fuzzing found to raise something else (or to load when they must not)."""
    path = tmp_path / "lab.toml"
    column = '\n[[column]]\nlabel = "a"\nbuild = "postgres@17.2"\n'
    path.write_text(text + ("\n" if text.startswith("comparison") else column))
    with pytest.raises(DbregressError, match=expect):
        load_lab(path)


@pytest.mark.parametrize(
    ("column", "expect"),
    [
        ('build = "postgres@.\\u0000"', "column\\[0\\].build: .*control character"),
        ('build = "postgres@17.2"\nconfig = "../mysql/default"', "config: unknown postgres"),
        ('build = "rocksdb@10.2.1"\nconfig = "default"', "config: unknown rocksdb config"),
        ('build = "postgres@17.2"\nsettings = { a = 1e400 }', "settings: inf is not allowed"),
        ('build = "postgres@17.2"\nsettings = { "a b" = 1 }', "settings: setting name 'a b'"),
        ('build = "postgres@17.2"\nsettings = { a = "x\\ny" }', "settings: .*line break"),
        ('build = "rocksdb@10.2.1"\nsettings = { cache_mb = "9e999" }', "settings: .*cache_mb"),
        ('build = "rocksdb@10.2.1"\nsettings = { cache_mb = "' + "9" * 400 + '" }', "settings"),
    ],
)
def test_fuzz_findings_in_columns(tmp_path: Path, column: str, expect: str) -> None:
    path = tmp_path / "lab.toml"
    path.write_text(f'[[column]]\nlabel = "a"\n{column}\n')
    with pytest.raises(DbregressError, match=expect):
        load_lab(path)


def test_a_file_name_that_is_no_lab_name(tmp_path: Path) -> None:
    path = tmp_path / "my lab.toml"
    path.write_text("")  # the empty file once crashed the line finder (IndexError)
    with pytest.raises(DbregressError, match=r"my lab.toml:1: name: the lab's name comes from"):
        load_lab(path)


def test_profile_fields_are_not_str_format(tmp_path: Path) -> None:
    sizes = Sizes(100, 200, 50)
    text = "a = {data_mb:x1.5,min64}M\nb = {cache_mb} # {comment}\n"
    assert configs.render_text(tmp_path / "p.conf", text, sizes) == {"a": "75M", "b": "100"}
    for bad in ("{cache_mb.real}", "{data_mb:x1e400}", "{0}", "}", "{data_mb:xnan}"):
        with pytest.raises(DbregressError, match=r"p.conf:2: x: "):
            configs.render_text(tmp_path / "p.conf", f"a = 1\nx = {bad}\n", sizes)


def test_profile_names_are_names_not_paths() -> None:
    with pytest.raises(DbregressError, match="unknown mysql config profile"):
        configs.render("mysql", "../postgres/default", Sizes(128, 1024), {})
