"""The exit statuses every command shares (run, report, compare, bisect, ...): one table,
printed by `--help` and the README, so that a CI job can tell "slower found" from "not
judged" from "the tool crashed".
"""

from __future__ import annotations

EXIT_OK = 0  # all went well; a gate passed: every step it judged is decided, none slower
EXIT_SLOWER = 1  # --fail-on: a judged step is confirmed slower
# --fail-on: a judged step is not decided (undecided, withheld, missing, skipped), or a
# lane or the run did not finish; also any error the tool names (bad input, a build that
# cannot be fetched, an engine that cannot start): the gate cannot pass on it
EXIT_UNJUDGED = 2
EXIT_CRASH = 3  # an unexpected exception: a bug in dbregress (the log's path is printed)
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM; every finished step is kept

TABLE = (
    (EXIT_OK, "all went well; with --fail-on, every judged step is decided and none is slower"),
    (EXIT_SLOWER, "--fail-on: a judged step is confirmed slower"),
    (
        EXIT_UNJUDGED,
        "--fail-on: a judged step is undecided, withheld, missing or skipped, or a lane or "
        "the run did not finish; or an error dbregress names (bad input, a build it cannot "
        "fetch, an engine that cannot start)",
    ),
    (EXIT_CRASH, "an unexpected error inside dbregress (a bug): one line and the log's path"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C, SIGTERM); every finished step is on disk"),
)


def epilog() -> str:
    """The table as `--help` prints it."""
    return "exit status:\n" + "\n".join(f"  {code:>3}  {what}" for code, what in TABLE)
