"""dbregress command line: parse, dispatch to one module per verb, turn errors into
messages in exactly one place."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dbregress import __version__, interrupts
from dbregress.cli import (
    bisect,
    calibrate,
    compare,
    explain,
    fetch,
    fleet,
    history,
    importcmd,
    report,
    run,
    versions,
)
from dbregress.errors import DbregressError, Interrupted

VERBS = (
    fetch,
    versions,
    run,
    report,
    calibrate,
    importcmd,
    compare,
    explain,
    bisect,
    history,
    fleet,
)
# 0: fine; 1: --fail-on found what it was told to fail on; 2: an error; 130: Ctrl-C.
EXIT_ERROR = 2


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dbregress",
        description="Find and explain performance regressions between database builds.",
    )
    p.add_argument("--version", action="version", version=f"dbregress {__version__}")
    sub = p.add_subparsers(dest="verb", required=True, metavar="COMMAND")
    for verb in VERBS:
        verb.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except Interrupted as e:
        print(f"Error: {e}", file=sys.stderr)
        return 130
    except DbregressError as e:
        print(f"Error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("Error: interrupted", file=sys.stderr)
        return 130
    finally:
        interrupts.settle()


if __name__ == "__main__":
    sys.exit(main())
