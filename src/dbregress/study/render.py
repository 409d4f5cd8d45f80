"""A study's lab as it runs: the user's params substituted into its build strings
(`{name}`, the only place a placeholder may stand), a scale's sizes merged over its
benchmark sections, and the text written into the run folder: the lab file's own text
(comments and all) where only params change, else the merged tables written as TOML."""

from __future__ import annotations

import copy
import datetime
import json
import re
import textwrap
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbregress.lab.file import Lab, parse_lab
from dbregress.model.errors import DbregressError, LabError
from dbregress.model.tomlreader import TableReader, TomlTable

PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Rendered:
    """A study's lab as it runs: its text (what the run folder keeps), the lab loaded
    from it, the scale and the params' values."""

    text: str
    lab: Lab
    scale: str
    values: dict[str, str]


def _join(table: str, key: str) -> str:
    return f"{table}.{key}" if table else key


def _tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(x, dict) for x in value)


def _walk(value: Any, table: str, key: str | None) -> Iterator[tuple[str, str, str]]:
    """(table path as TableReader names it, key, string) of every string in the data."""
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, dict):
                yield from _walk(v, _join(table, k), None)
            elif _tables(v):
                for i, item in enumerate(v):
                    yield from _walk(item, _join(table, f"{k}[{i}]"), None)
            else:
                yield from _walk(v, table, k)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, table, key)
    elif isinstance(value, str) and key is not None:
        yield table, key, value


def _is_build(table: str, key: str) -> bool:
    return key == "build" and table.rpartition(".")[2].startswith("column[")


def check_placeholders(
    lab_path: Path, text: str, data: Mapping[str, Any], params: Mapping[str, str]
) -> None:
    """Every `{name}` of a build string names a param of the study; no other string of
    the lab holds a param's placeholder. LabError naming the lab file's line."""
    for table, key, value in _walk(data, "", None):
        names = PLACEHOLDER.findall(value)
        if not names:
            continue
        r = TableReader(lab_path, text, table, {})
        unknown = [n for n in names if n not in params]
        if _is_build(table, key) and unknown:
            known = ", ".join(params) or "none"
            raise r.fail(
                key,
                f"{{{unknown[0]}}} names no param of the study (its params: {known}); "
                "declare it under [study.params]",
            )
        if not _is_build(table, key) and len(unknown) < len(names):
            raise r.fail(key, "a {param} placeholder is allowed in build strings only")


def _column_tables(value: Any) -> Iterator[TomlTable]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "column" and _tables(v):
                yield from v
            else:
                yield from _column_tables(v)
    elif isinstance(value, list):
        for item in value:
            yield from _column_tables(item)


def column_builds(data: Mapping[str, Any]) -> dict[str, str]:
    """Each column's build string as the lab file writes it (placeholders and all)."""
    return {
        str(c["label"]): c["build"]
        for c in _column_tables(data)
        if "label" in c and isinstance(c.get("build"), str)
    }


def substitute(data: Mapping[str, Any], values: Mapping[str, str]) -> TomlTable:
    """The lab's tables with each build string's placeholders replaced by `values`."""
    out = copy.deepcopy(dict(data))
    for column in _column_tables(out):
        build = column.get("build")
        if isinstance(build, str):
            column["build"] = PLACEHOLDER.sub(lambda m: values.get(m[1], m[0]), build)
    return out


def template_lab(
    lab_path: Path, text: str, data: Mapping[str, Any], params: Mapping[str, str]
) -> Lab:
    """The lab as written, loaded by the lab loader with each param standing in as an
    absolute path `/{name}` (a source tree or a basedir; nothing is read from it)."""
    return parse_lab(substitute(data, {n: f"/{{{n}}}" for n in params}), lab_path, text)


def _blocks(data: TomlTable) -> list[tuple[str, str, TomlTable]]:
    """(benchmark, comparison name, its table) of each comparison of a lab's tables."""
    if _tables(data.get("comparison")):
        out = []
        for block in data["comparison"]:
            bench = str(block.get("benchmark", "insert"))
            out.append((bench, str(block.get("name", bench)), block))
        return out
    bench = str(data.get("benchmark", "insert"))
    return [(bench, bench, data)]


def scale_targets(data: TomlTable) -> list[str]:
    """What a [scale.NAME] table may name: a benchmark section, or a comparison."""
    return list(dict.fromkeys(k for bench, name, _ in _blocks(data) for k in (bench, name)))


def ambiguous(data: TomlTable, key: str) -> str | None:
    """The comparisons (named) a [scale.NAME] key would reach as a benchmark section,
    when it also names a comparison that is not the only one of them (merge_scale would
    merge it into every one, the comparison's own section included whatever its
    benchmark); None when it reaches one comparison either way."""
    blocks = _blocks(data)
    if key not in {name for _, name, _ in blocks}:
        return None
    reached = [name for bench, name, _ in blocks if bench == key]
    if not reached or reached == [key]:
        return None
    return ", ".join(reached)


def merge_scale(data: Mapping[str, Any], scale: Mapping[str, Mapping[str, Any]]) -> TomlTable:
    """The lab's tables with a scale merged: a benchmark's sizes over the section of each
    comparison of that benchmark, then a comparison's own over its section."""
    out = copy.deepcopy(dict(data))
    for bench, name, block in _blocks(out):
        for key in dict.fromkeys((bench, name)):
            if key in scale:
                section = block.get(bench, {})
                block[bench] = {**(section if isinstance(section, dict) else {}), **scale[key]}
    return out


def lab_text(
    text: str,
    data: Mapping[str, Any],
    values: Mapping[str, str],
    scale: Mapping[str, Mapping[str, Any]],
    head: str,
) -> str:
    """The text of the lab as it runs: the file's own with the params put in, where that
    reads back as the lab's tables with them; else (a scale merged, a value TOML would
    need written otherwise) the tables written anew after the comment `head`."""
    wanted = merge_scale(substitute(data, values), scale)
    if not scale:
        escaped = {n: json.dumps(v, ensure_ascii=False)[1:-1] for n, v in values.items()}
        candidate = PLACEHOLDER.sub(lambda m: escaped.get(m[1], m[0]), text)
        try:
            if tomllib.loads(candidate) == wanted:
                return candidate
        except tomllib.TOMLDecodeError:
            pass
    return toml_text(wanted, head)


def toml_text(data: Mapping[str, Any], head: str = "") -> str:
    """TOML of a lab's tables (tables, arrays of tables, strings, numbers, booleans,
    lists), checked to read back as the same tables."""
    lines = [f"# {line}".rstrip() for line in textwrap.wrap(head, 86)]
    _table(lines, data, ())
    text = "\n".join(lines).strip("\n") + "\n"
    if tomllib.loads(text) != data:
        raise DbregressError("the lab cannot be written back as TOML as it is (a bug)")
    return text


def _table(lines: list[str], data: Mapping[str, Any], path: tuple[str, ...]) -> None:
    for key, value in data.items():
        if not isinstance(value, dict) and not _tables(value):
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in data.items():
        dotted = ".".join(_key(k) for k in (*path, key))
        if isinstance(value, dict):
            lines += ["", f"[{dotted}]"]
            _table(lines, value, (*path, key))
        elif _tables(value):
            for item in value:
                lines += ["", f"[[{dotted}]]"]
                _table(lines, item, (*path, key))


def _key(key: str) -> str:
    return key if BARE_KEY.fullmatch(key) else _string(key)


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    raise LabError(f"a lab value of type {type(value).__name__} cannot be written as TOML")


def param_values(name: str, params: Mapping[str, str], given: Mapping[str, str]) -> dict[str, str]:
    """The values of every param of the study: an unknown, missing or empty one is an
    error that names it and says what it is."""
    for key in given:
        if key not in params:
            known = ", ".join(params) or "none"
            raise DbregressError(
                f"--param {key}: study {name} has no such param (its params: {known})"
            )
    missing = [p for p in params if not given.get(p, "").strip()]
    if missing:
        said = "; ".join(f"--param {p}=VALUE: {params[p]}" for p in missing)
        raise DbregressError(f"study {name} needs {said}")
    return {p: given[p] for p in params}
