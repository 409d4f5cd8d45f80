"""What `dbregress run` shows while a lab runs (src/dbregress/cli/progress.py): the live
display, rendered into a recording console from synthetic Progress records on a fake
clock, and the plain lines of a log. No engine, no real time."""

from __future__ import annotations

import io
import sys

import pytest
from rich.console import Console

from dbregress.cli import progress
from dbregress.cli.progress import LiveDisplay, PlainLines, clock_text
from dbregress.execution.execute import Progress
from dbregress.execution.step import LiveRate, live_rate

SHOW_CURSOR, HIDE_CURSOR = "\x1b[?25h", "\x1b[?25l"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def record(
    job_index: int,
    step_index: int,
    step: str,
    elapsed: float = 0.0,
    left: float | None = None,
    rate: LiveRate | None = None,
    jobs: int = 4,
    repeat: int = 1,
) -> Progress:
    return Progress(
        job=f"r10/r{repeat}",
        job_index=job_index,
        jobs=jobs,
        step=step,
        step_index=step_index,
        steps=2,
        elapsed_s=elapsed,
        remaining_s=left,
        comparison="kv",
        column="r10",
        repeat=repeat,
        rate=rate,
    )


def console() -> Console:
    return Console(record=True, force_terminal=True, width=100, file=io.StringIO())


def frame(display: LiveDisplay) -> list[str]:
    """The display's current frame as text, one entry per line."""
    c = console()
    c.print(display.render())
    return [line.rstrip() for line in c.export_text().splitlines()]


def test_live_display_shows_the_job_the_step_its_qps_and_the_times() -> None:
    clock = FakeClock()
    display = LiveDisplay(console(), clock, auto_refresh=False)
    put = LiveRate("put", "ops", 123456.7)
    display.update(record(1, 1, "fillseq", elapsed=12, left=48, rate=put, repeat=0))
    lab, now, step = frame(display)
    assert lab.startswith("lab ") and "━" in lab
    assert lab.endswith("job 1/4   elapsed 0:00   left ?")  # no job has ended yet
    assert now == "now   kv, column r10, repeat 0 (warm-up) (r10/r0), step 1/2 fillseq"
    assert step == "step  elapsed 0:12   left 0:48   QPS 123,457 (put ops/s)"

    clock.now += 150  # job 1 took 2:30; two more jobs and this one are left
    get = LiveRate("get", "ops", 45.678)
    display.update(record(2, 2, "readrandom", elapsed=3725, rate=get, repeat=1))
    clock.now += 30
    lab, now, step = frame(display)
    assert lab.endswith("job 2/4   elapsed 3:00   left ~7:00")  # 2 x 2:30 + (2:30 - 0:30)
    assert now == "now   kv, column r10, repeat 1 (r10/r1), step 2/2 readrandom"
    assert step == "step  elapsed 1:02:05   left ?   QPS 45.7 (get ops/s)"


def test_no_rate_yet_and_rows_per_second() -> None:
    display = LiveDisplay(console(), FakeClock(), auto_refresh=False)
    display.update(record(1, 1, "l.i0", elapsed=0.5, left=None))
    assert frame(display)[2] == "step  elapsed 0:00   left ?   QPS -"
    display.update(record(1, 1, "l.i0", rate=LiveRate("insert", "rows", 20000.0)))
    assert frame(display)[2].endswith("QPS 20,000 (insert rows/s)")


def bar_done(display: LiveDisplay) -> int:
    """How many of the lab bar's 40 cells are drawn as done."""
    c = console()
    done = (c.get_style("bar.complete"), c.get_style("bar.finished"))
    return sum(len(s.text) for s in c.render(display.render()) if s.style in done)


def test_the_lab_bar_counts_jobs_and_steps_done() -> None:
    display = LiveDisplay(console(), FakeClock(), auto_refresh=False)
    display.update(record(1, 1, "fillseq"))
    assert bar_done(display) == 0
    display.update(record(3, 2, "readrandom"))  # 2 jobs and half a job of 4 done
    assert bar_done(display) == 25


def test_messages_print_above_the_display() -> None:
    c = console()
    display = LiveDisplay(c, FakeClock(), auto_refresh=False)
    with display:
        display.update(record(1, 1, "fillseq", left=10, rate=LiveRate("put", "ops", 5000.0)))
        display.line("kv: adding round 4 (at most 6): 1 undecided: readrandom (r10)")
        display.update(record(1, 2, "readrandom", left=5, rate=LiveRate("get", "ops", 9000.0)))
    text = c.export_text()
    message = text.index("kv: adding round 4")
    assert text.index("step 1/2 fillseq") < message < text.rindex("step 2/2 readrandom")
    assert text.rstrip().endswith("QPS 9,000 (get ops/s)")  # the last frame stays
    assert "job 1/4   elapsed 0:00   left ~0:00" in text.splitlines()[-3]  # the run is over
    assert bar_done(display) == 40
    assert c.file.getvalue().endswith(SHOW_CURSOR)


def test_ctrl_c_stops_the_display_and_gives_the_cursor_back() -> None:
    c = console()
    streams = (sys.stdout, sys.stderr)
    display = LiveDisplay(c, FakeClock(), auto_refresh=True)
    with pytest.raises(KeyboardInterrupt), display:
        display.update(record(1, 1, "fillseq"))
        assert (sys.stdout, sys.stderr) != streams  # other output goes above the display
        raise KeyboardInterrupt("SIGINT")
    written = c.file.getvalue()
    assert HIDE_CURSOR in written and written.endswith(SHOW_CURSOR)
    assert not display.live.is_started  # its refresh thread has ended
    assert (sys.stdout, sys.stderr) == streams
    assert bar_done(display) == 0  # as it was: the lab did not end


def test_plain_lines_print_one_line_per_step() -> None:
    out = io.StringIO()
    plain = PlainLines(out)
    with plain:
        for job in (1, 2):  # the same step names in consecutive jobs
            for step_index, step in ((1, "fillseq"), (2, "readrandom")):
                for t in range(3):  # several interval updates per step
                    plain.update(record(job, step_index, step, elapsed=t, jobs=2, repeat=job))
        plain.line("kv: adding round 3 (at most 5): 1 undecided: readrandom (r10)")
    assert out.getvalue().splitlines() == [
        "[1/2 r10/r1] step 1/2 fillseq",
        "[1/2 r10/r1] step 2/2 readrandom",
        "[2/2 r10/r2] step 1/2 fillseq",
        "[2/2 r10/r2] step 2/2 readrandom",
        "kv: adding round 3 (at most 5): 1 undecided: readrandom (r10)",
    ]


def test_a_pipe_gets_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert isinstance(progress.for_stderr(), PlainLines)


def test_clock_text() -> None:
    assert [clock_text(s) for s in (None, 0, 59.9, 61, 3600, 36125)] == [
        "?",
        "0:00",
        "0:59",
        "1:01",
        "1:00:00",
        "10:02:05",
    ]


def interval(t_s: float, **counts: tuple[int, int]) -> dict[str, object]:
    ops = {op: {"ops": n, "rows": r, "max_us": 10, "errors": 0} for op, (n, r) in counts.items()}
    return {"type": "interval", "t_s": t_s, "ops": ops}


def test_live_rate_is_the_main_operation_over_the_interval() -> None:
    # a q-step: the paced writers run beside the queries, which are the step's Q
    qp = interval(2.0, insert=(10, 1000), delete=(10, 1000), point_query=(500, 500))
    assert live_rate(qp, 1.0) == LiveRate("point_query", "ops", 500.0)
    # a load counts rows; half a second since the previous interval
    assert live_rate(interval(3.5, insert=(20, 2000), delete=(20, 2000)), 3.0) == LiveRate(
        "insert", "rows", 4000.0
    )
    assert live_rate(interval(1.0, flush=(1, 0), compact=(2, 0)), 0.0) == LiveRate(
        "compact", "ops", 2.0
    )
    read = live_rate(interval(1.0, get=(900, 900), put=(50, 50)), 0.0)  # readwhilewriting
    assert read is not None and read.op == "get"
    assert live_rate(interval(1.0), 0.0) is None
    assert live_rate(interval(1.0, get=(9, 9)), 1.0) is None  # no length
