"""The exit statuses every command shares (run, report, compare, bisect, ...): one table,
printed by `--help` and the README, so that a CI job can tell "slower found" from "not
judged" from "the tool crashed".

A run folder gets the same status from `run --fail-on` as from `report RUN --fail-on`:
a confirmed `slower` is 1 whatever else failed (a job, the report's files that could not
be written); then a bug in dbregress, whether it ended the command or was recorded in a
job, a step or a replay of the run, is 3; then anything not judged is 2.
"""

from __future__ import annotations

EXIT_OK = 0  # all went well; a gate passed: every step it judged is decided, none slower
EXIT_SLOWER = 1  # --fail-on: a judged step is confirmed slower, whatever else failed
# --fail-on: a judged step is not decided (undecided, withheld, missing, skipped), or a
# lane or the run did not finish; also any error the tool names (bad input, a build that
# cannot be fetched, an engine that cannot start): the gate cannot pass on it
EXIT_UNJUDGED = 2
# a bug in dbregress: an unexpected exception (the log's path is printed), or one a job,
# a step or a replay of the run recorded (model/errors.is_bug; its traceback in the run)
EXIT_CRASH = 3
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM; every finished step is kept

TABLE = (
    (EXIT_OK, "all went well; with --fail-on, every judged step is decided and none is slower"),
    (EXIT_SLOWER, "--fail-on: a judged step is confirmed slower (even when a job failed)"),
    (
        EXIT_UNJUDGED,
        "--fail-on: a judged step is undecided, withheld, missing or skipped, or a lane or "
        "the run did not finish; or an error dbregress names (bad input, a build it cannot "
        "fetch, an engine that cannot start)",
    ),
    (
        EXIT_CRASH,
        "a bug in dbregress: an unexpected error (one line and the log's path), or one "
        "recorded in a job, step or replay of the run (its traceback in the run folder)",
    ),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C, SIGTERM); every finished step is on disk"),
)


def epilog() -> str:
    """The table as `--help` prints it."""
    return "exit status:\n" + "\n".join(f"  {code:>3}  {what}" for code, what in TABLE)
