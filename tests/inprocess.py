"""The command line run in this process: `main()` with the arguments a user types, and
its exit code, stdout and stderr as a subprocess would give them. For the commands that
start no engine and install no signal handler (import, report, compare): a test then
pays for Python's start and for importing numpy and scipy once, not once per command
(about 4 s each on a small host)."""

from __future__ import annotations

import contextlib
import io
import subprocess
from pathlib import Path

from dbregress.cli.main import main


def dbregress_here(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse's own exits: a usage error, --help
            code = e.code if isinstance(e.code, int) else 1
    return subprocess.CompletedProcess(["dbregress", *args], code, out.getvalue(), err.getvalue())
