"""A source build's cache-key inputs (provision/source/key.py): what build-inputs.json
beside every build holds and `dbregress fetch --why` prints."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class TreeInputs(TypedDict):
    """The tree: a commit with its submodules' commits (and the subdirectory of the
    checkout built, if not its top), or the digest of a tree built as it is on disk."""

    commit: NotRequired[str]
    submodules: NotRequired[dict[str, str]]
    subdir: NotRequired[str]
    digest: NotRequired[str]


class CompilerIdentity(TypedDict):
    """A compiler: its path, the file it resolves to and that file's digest, its
    version lines, and the digests of the programs it runs (cc1, cc1plus, ld)."""

    path: str
    resolved: str
    sha256: str
    version: str
    target: str
    full_version: str
    ccache_masquerade: NotRequired[str]
    cc1_sha256: NotRequired[str]
    cc1plus_sha256: NotRequired[str]
    ld_sha256: NotRequired[str]


class CxxHeaders(TypedDict):
    """The C++ standard library headers the C++ compiler includes: the file <vector>
    resolves to and the Debian package that owns it with its version, or the header's
    digest where no package owns it."""

    header: str
    package: str
    version: str


class CpuInputs(TypedDict):
    """The host CPU of a flavor tuned to it: its model, and what the flavor's flags mean
    to the compiler (`-Q --help=target` of the flags: every instruction set enabled,
    those the flags turn off included), else a digest of /proc/cpuinfo's flags;
    `turned_off`: the instruction sets the flags leave out (-mno-...)."""

    model: str
    native_sha256: NotRequired[str]
    flags_sha256: NotRequired[str]
    turned_off: list[str]


class KeyedPatch(TypedDict):
    """A recipe's patch as the key holds it: its file's name, not its path."""

    name: str
    versions: str
    sha256: str


class KeyedRecipe(TypedDict):
    """A normalized recipe (provision/source/recipes.py Recipe) with its patches keyed
    by name."""

    cflags: str
    ldflags: str
    configure: NotRequired[list[str]]
    cmake: NotRequired[list[str]]
    build_type: NotRequired[str]
    cc: NotRequired[str]
    cxx: NotRequired[str]
    patches: NotRequired[list[KeyedPatch]]
    lto: NotRequired[bool]
    myrocks: NotRequired[bool]


class BuildInputs(TypedDict):
    """Everything a source build's cache key is made of."""

    builder_version: int
    engine: str
    family: str
    tree: TreeInputs
    flavor: str
    recipe: KeyedRecipe
    compilers: dict[str, CompilerIdentity]
    tools: dict[str, str]
    # every linker the compiler may choose (ld, ld.bfd, ld.gold, ld.lld): a tree's cmake
    # picks lld or gold when it finds them (MySQL 8.0), so installing one is another build
    linkers: dict[str, str]
    packages: dict[str, str]
    cxx_headers: NotRequired[CxxHeaders]
    # libraries and headers under /usr/local (no package manager knows them): a digest
    # per directory the build systems search
    local: dict[str, str]
    fixed_options: list[str]
    environment: dict[str, str]
    cpu: NotRequired[CpuInputs]


class BuildWhy(TypedDict):
    """What `dbregress fetch --why` prints of a source build: its key, where it is,
    whether it is built, its inputs, and what a tree's digest left out."""

    key: str
    path: str
    cached: bool
    inputs: BuildInputs
    digested: NotRequired[str]
