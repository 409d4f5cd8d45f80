"""dbregress command line: parse, dispatch to one module per verb, turn errors into
messages in exactly one place."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from dbregress import __version__
from dbregress.cli import (
    bisect,
    calibrate,
    compare,
    explain,
    fetch,
    fleet,
    history,
    importcmd,
    ledger,
    report,
    run,
    site,
    store,
    study,
    versions,
)
from dbregress.cli.exits import EXIT_CRASH, EXIT_INTERRUPTED, EXIT_UNJUDGED, epilog
from dbregress.model import interrupts
from dbregress.model.errors import DbregressError, InternalError, Interrupted

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
    ledger,
    site,
    fleet,
    store,
    study,
)
EXIT_ERROR = EXIT_UNJUDGED  # an error dbregress names: whatever was asked is not judged


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dbregress",
        description="Find and explain performance regressions between database builds.",
        epilog=epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"dbregress {__version__}")
    sub = p.add_subparsers(dest="verb", required=True, metavar="COMMAND")
    for verb in VERBS:
        verb.add_parser(sub)
    for command in sub.choices.values():  # one table of exit statuses in every --help
        command.epilog = epilog()
        command.formatter_class = argparse.RawDescriptionHelpFormatter
    return p


def crash_log(args: argparse.Namespace, error: BaseException) -> Path:
    """Writes an unexpected exception's traceback where the user will look: the results
    folder when the command has one, else the temporary directory."""
    results = getattr(args, "results", None)
    folder = results if isinstance(results, Path) and results.is_dir() else None
    name = f"dbregress-crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    text = "".join(traceback.format_exception(error))
    for where in (folder, Path(tempfile.gettempdir())):
        if where is None:
            continue
        try:
            (where / name).write_text(f"dbregress {__version__}: {' '.join(sys.argv)}\n{text}")
            return where / name
        except OSError:
            continue
    return Path(os.devnull)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except Interrupted as e:
        print(f"Error: {e}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except InternalError as e:  # a bug recorded where it happened, with its traceback
        print(f"Error: {e}", file=sys.stderr)
        return EXIT_CRASH
    except DbregressError as e:
        print(f"Error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("Error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # a bug: its own status, never "slower found" or "not judged"
        log = crash_log(args, e)
        first = (str(e).splitlines() or [""])[0]
        print(
            f"Error: unexpected {type(e).__name__}: {first} (a bug in dbregress, or input "
            f"it does not check; traceback in {log})",
            file=sys.stderr,
        )
        return EXIT_CRASH
    finally:
        interrupts.settle()


if __name__ == "__main__":
    sys.exit(main())
