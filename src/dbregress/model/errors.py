"""One error hierarchy, turned into a message once, in the CLI entry point.

A message says what failed, for which build/step/file, and what to do about it.

Inside a step, a job or a counting replay, an exception is recorded and the lab goes on;
`is_bug` says once which of them are a bug in dbregress (exit 3 wherever the run is
judged: `run`, `report --fail-on`, `compare --fail-on`) rather than a failure of an
engine, a build, the host or the input (exit 2 when they leave a step not judged).
"""

import subprocess
import traceback


class DbregressError(Exception):
    """An error the user can act on; printed as `Error: <message>`, exit status 2."""


class LabError(DbregressError):
    """The lab file is malformed or names something that does not exist."""


class BuildNotFound(DbregressError):
    """An unknown engine or version; the message lists the closest available."""


class ProvisionError(DbregressError):
    """Fetching or unpacking a build failed."""


class EngineError(DbregressError):
    """An engine failed to initialize, start, or keep running."""


class ConfigRejected(EngineError):
    """The engine refused a setting of a config profile; carries the server's own message."""


class EngineCrashed(EngineError):
    """The engine died or stopped answering during a step."""


class StepTimeout(DbregressError):
    """A step ran past its deadline (a hang)."""


class LoadgenError(DbregressError):
    """dbregress-loadgen failed, was killed, or reported a fatal error or a failed check."""


class StoreError(DbregressError):
    """A results folder is missing, unreadable, or of another schema version."""


class BuildMoved(StoreError):
    """A resumed run's column got another build than its finished jobs measured."""


class Interrupted(DbregressError):
    """The user pressed Ctrl-C; finished steps are on disk."""


class InternalError(DbregressError):
    """A bug in dbregress met inside a step, a job or a replay, recorded there with its
    traceback while the lab went on: exit 3, as an unexpected exception is."""


# Not a bug: an error dbregress names (an engine, a build, the loadgen, the input, the
# results folder), one of the host's (a full disk, a permission, a binary that cannot be
# executed), an external program's deadline or status, an interrupt.
NOT_A_BUG = (DbregressError, OSError, subprocess.SubprocessError, KeyboardInterrupt, SystemExit)


def is_bug(error: BaseException) -> bool:
    """Whether an exception caught inside a step, a job or a replay is a bug in
    dbregress (a TypeError, a KeyError, an assertion...), to be recorded as one."""
    return not isinstance(error, NOT_A_BUG)


def traceback_of(error: BaseException) -> str:
    """The exception's traceback as recorded beside it (a step's, a replay's, run.json's
    failures)."""
    return "".join(traceback.format_exception(error)).strip()
