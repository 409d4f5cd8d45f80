"""One error hierarchy, turned into a message once, in the CLI entry point.

A message says what failed, for which build/step/file, and what to do about it.
"""


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


class Interrupted(DbregressError):
    """The user pressed Ctrl-C; finished steps are on disk."""
