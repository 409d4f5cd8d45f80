"""How a run or a counting replay was measured (dbregress/method/identity.py identity()): history
never sets the figures of two methods against each other."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class MethodIdentity(TypedDict):
    """How a run (or a counting replay) was measured: dbregress/method/identity.py says what each
    field is; every field is part of the identity's key."""

    dbregress: str
    loadgen_sha256: str | None
    valgrind: str | None
    libc: str
    caches: str
    cost_model: str
    counting_profile: str
    # the processor valgrind presents (method.cpu_features); absent in identities
    # recorded before it was part of them
    cpu_features: NotRequired[str | None]
