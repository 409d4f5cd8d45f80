"""`dbregress import tsv`: tables whose rows are grouped under `col-1 ... -> <group>`
headers, and a table as a published report of ours prints it."""

from __future__ import annotations

import pytest

from dbregress.imports import tsv
from dbregress.imports.common import Repeat, UnparseableFile

# Tab-separated legend and rows, the second group header space-separated; point-query
# is in both groups, so it is named by its group in each.
GROUPED = """\
Relative to: base
col-1 : new-a
col-2 : new-b

col-1\tcol-2\t-> point queries
0.97\t0.95\tpoint-query_range=100
0.99\t-\trandom-points_range=10
col-1   col-2   ->   range queries
0.88    0.85    scan_range=100
0.90    0.86    point-query_range=100
"""

# Copied as printed from one of our reports (spaces between the columns, no groups).
REPORT = """\
Relative to: x.fbmy5635_rel_o2nofp_210407_f896415f_6190
col-1 : x.fbmy5635_rel_o2nofp_231016_4f3a57a1_870
col-2 : x.fbmy8028_rel_o2nofp_220829_a35c8dfe_752
col-3 : x.fbmy8028_rel_o2nofp_231202_4edf1eec_870
col-4 : x.fbmy8032_rel_o2nofp_231204_e3a854e8_870
col-5 : x.fbmy8032_rel_o2nofp_240529_49b37dfe_921

col-1   col-2   col-3   col-4   col-5
0.94    0.69    0.77    0.77    0.70    scan_range=100
0.95    0.84    0.83    0.81    0.79    insert_range=100
0.99    0.91    0.91    0.88    0.89    point-query_range=100
0.96    0.97    0.94    0.92    0.91    update-index_range=100
"""


def _table(repeat: Repeat) -> list[tuple[str, float, str | None]]:
    return [(m.step, m.qps, m.detail.get("group")) for m in repeat.steps]


def test_grouped_table_steps_values_and_groups() -> None:
    base, a, b = tsv.parse(GROUPED, "g.tsv")
    assert [r.label for r in (base, a, b)] == ["base", "new-a", "new-b"]
    assert _table(a) == [
        ("point-query_range=100@point_queries", 0.97, "point queries"),
        ("random-points_range=10", 0.99, "point queries"),
        ("scan_range=100", 0.88, "range queries"),
        ("point-query_range=100@range_queries", 0.90, "range queries"),
    ]
    assert _table(b) == [
        ("point-query_range=100@point_queries", 0.95, "point queries"),  # `-`: no value
        ("scan_range=100", 0.85, "range queries"),
        ("point-query_range=100@range_queries", 0.86, "range queries"),
    ]
    assert [(m.qps, m.unit) for m in base.steps] == [(1.0, "relative")] * 4
    assert all(m.detail["tool"] == "table" for r in (base, a, b) for m in r.steps)


def test_a_step_in_one_group_and_outside_any() -> None:
    table = "col-1 : a\n5\tinsert\ncol-1 -> writes\n6\tinsert\ncol-1\n7\tscan\n"
    (a,) = tsv.parse(table, "t.tsv")
    assert _table(a) == [
        ("insert", 5, None),
        ("insert@writes", 6, "writes"),
        ("scan", 7, None),  # a plain header ends the group
    ]


def test_arrow_without_blanks_and_a_step_holding_an_arrow() -> None:
    (a,) = tsv.parse("col-1 : a\ncol-1->reads\n5\tread->write\n", "t.tsv")
    assert _table(a) == [("read-_write", 5, "reads")]


def test_report_excerpt_parses_whole() -> None:
    repeats = tsv.parse(REPORT, "report.txt")
    assert [r.label for r in repeats] == [
        "x.fbmy5635_rel_o2nofp_210407_f896415f_6190",
        "x.fbmy5635_rel_o2nofp_231016_4f3a57a1_870",
        "x.fbmy8028_rel_o2nofp_220829_a35c8dfe_752",
        "x.fbmy8028_rel_o2nofp_231202_4edf1eec_870",
        "x.fbmy8032_rel_o2nofp_231204_e3a854e8_870",
        "x.fbmy8032_rel_o2nofp_240529_49b37dfe_921",
    ]
    steps = ["scan_range=100", "insert_range=100", "point-query_range=100"]
    assert all([m.step for m in r.steps] == [*steps, "update-index_range=100"] for r in repeats)
    assert [m.qps for m in repeats[5].steps] == [0.70, 0.79, 0.89, 0.91]
    assert all(m.unit == "relative" and m.detail == {"tool": "table"} for m in repeats[1].steps)


def test_report_excerpt_with_groups_keeps_its_values() -> None:
    grouped = REPORT.replace(
        "col-1   col-2   col-3   col-4   col-5\n",
        "col-1   col-2   col-3   col-4   col-5   -> all\n",
    )
    plain, with_groups = tsv.parse(REPORT, "r.txt"), tsv.parse(grouped, "r.txt")
    assert [[(m.step, m.qps) for m in r.steps] for r in with_groups] == [
        [(m.step, m.qps) for m in r.steps] for r in plain
    ]
    assert {m.detail["group"] for r in with_groups for m in r.steps} == {"all"}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            "col-1 : a\ncol-2 : b\ncol-1\tcol-3\t-> reads\n5\t6\tget\n",
            r"t.tsv, line 3: the header names \['col-1', 'col-3'\], "
            r"the legend \['col-1', 'col-2'\]",
        ),
        (
            "col-1 : a\ncol-2 : b\ncol-1 -> reads\n",
            r"t.tsv, line 3: the header names \['col-1'\], the legend \['col-1', 'col-2'\]",
        ),
        (
            "col-1 : a\n-> reads\n",
            r"t.tsv, line 2: the header names \[\], the legend \['col-1'\]",
        ),
        ("col-1 -> reads\n", r"t.tsv, line 1: a table before its legend"),
        ("col-1 : a\ncol-1 ->  \n5 get\n", r"t.tsv, line 2: a group header without a group name"),
        ("col-1 : a\ncol-1 -> ..\n5 get\n", r"t.tsv, line 2: group name '..' has no usable"),
    ],
)
def test_bad_group_header_names_the_line(table: str, message: str) -> None:
    with pytest.raises(UnparseableFile, match=message):
        tsv.parse(table, "t.tsv")


def test_duplicate_step_within_a_group() -> None:
    table = "col-1 : a\ncol-1 -> reads\n5\tget\ncol-1 -> writes\n6\tput\n7\tput\n"
    with pytest.raises(
        UnparseableFile, match=r"t.tsv, line 6: step 'put' has a row already in group 'writes'"
    ):
        tsv.parse(table, "t.tsv")


def test_duplicate_step_in_a_group_repeated_later() -> None:
    table = "col-1 : a\ncol-1 -> reads\n5\tget\ncol-1 -> writes\n6\tput\ncol-1 -> reads\n7\tget\n"
    with pytest.raises(UnparseableFile, match=r"line 7: step 'get' has a row already in group"):
        tsv.parse(table, "t.tsv")


def test_step_named_by_group_that_another_row_holds() -> None:
    table = "col-1 : a\n1\tget@reads\ncol-1 -> reads\n2\tget\ncol-1 -> writes\n3\tget\n"
    with pytest.raises(
        UnparseableFile,
        match=r"t.tsv, line 4: two rows are named step 'get@reads' \(the other on line 2\)",
    ):
        tsv.parse(table, "t.tsv")


def test_plain_table_duplicate_message_unchanged() -> None:
    with pytest.raises(UnparseableFile, match=r"t.tsv, line 3: step 'get' has a row already$"):
        tsv.parse("col-1 : a\n5\tget\n6\tget\n", "t.tsv")
