"""The count store's records (store/counted.py, docs/count-store.md): one file per
stored counting replay (`StoredEntry`), its key's parts, the windows it counted and
where it was counted; and a take of stored replays by a run (`StoreTake`), which the
rule "recount a reused build every N runs" reads (cost/reuse.py)."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from dbregress.shapes.replay import ReplayRecord


class CountKeyParts(TypedDict):
    """What a stored replay's counts depend on (store/counted.py CountKey)."""

    build: str
    count: str
    steps: list[str]
    profile: str


class EngineConfig(TypedDict):
    """The configuration a counting replay starts its engine with, as the store's key
    holds it (cost/planning.py engine_config): the rendered settings and the digest of
    the code that turns them into the engine's configuration."""

    settings: dict[str, str]
    code: str


class StoredWindow(TypedDict):
    """A counted step's window as the store keeps it (cost/reuse.py window_of): its
    place in the benchmark, `ops` Q calls after `skip_ops`, the last `warm_ops` of
    those instrumented, the writers' pace and the hit rate it waited for (0: none)."""

    index: int
    skip_ops: int
    ops: int
    q_per_s: float
    warm_ops: int
    until_hit_rate: float


class StoreOrigin(TypedDict):
    """Where a stored replay was counted."""

    run: str
    column: str
    replay: int
    stored_at: float  # seconds since the epoch
    host: NotRequired[str | None]  # the fleet worker that counted it (None: the run's host)
    # the class of the host that counted it (store/history_rows.py host_fingerprint);
    # absent in entries stored before it was kept
    host_class: NotRequired[str | None]


class StoredEntry(TypedDict):
    """count-store/<key[:2]>/<key>/<run>.<column>.r<N>.json."""

    schema_version: int
    kind: Literal["stored-replay"]
    key: CountKeyParts
    build: str  # as the lab named it, for people
    windows: dict[str, StoredWindow]
    windows_digest: str
    origin: StoreOrigin
    record: ReplayRecord


class StoreTake(TypedDict):
    """count-store/<key[:2]>/<key>/taken/<run>.<column>.json: a run's column took
    stored replays of the key instead of counting (what `recount_every` counts)."""

    schema_version: int
    kind: Literal["store-take"]
    run: str
    column: str
    entries: list[str]  # the entries taken (KEY/FILE)
    taken_at: float  # seconds since the epoch
