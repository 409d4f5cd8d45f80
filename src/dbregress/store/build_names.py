"""The name the stores give a build: its identity (run.json `builds`) but for what does
not pin its code. The count store keys counts by it, and a resumed run refuses a build
that became another under the same label since the run began."""

from __future__ import annotations

from collections.abc import Mapping

from dbregress.method import identity as method
from dbregress.store.counted import digest

# What a build's identity records that does not pin its code: when and where it was
# fetched or built, how long it took, whether the cache had it, the name the lab gave
# it. A key with them would change with every fetch, checkout folder or cache hit.
VOLATILE = ("fetched_at", "cache_hit", "build_s", "ccache", "path", "tree", "ref", "spec")


def build_key(identity: Mapping[str, object] | None) -> str | None:
    """The store's name of a build: its identity but for what does not pin its code
    (VOLATILE); None for a build whose identity does not pin it (method.build_key)."""
    if identity is None or method.build_key(identity) is None:
        return None
    return digest({k: v for k, v in identity.items() if k not in VOLATILE})
