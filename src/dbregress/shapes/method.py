"""How a run or a counting replay was measured (dbregress/method.py identity()): history
never sets the figures of two methods against each other."""

from __future__ import annotations

from typing import TypedDict


class MethodIdentity(TypedDict):
    """How a run (or a counting replay) was measured: dbregress/method.py says what each
    field is; every field is part of the identity's key."""

    dbregress: str
    loadgen_sha256: str | None
    valgrind: str | None
    libc: str
    caches: str
    cost_model: str
    counting_profile: str
