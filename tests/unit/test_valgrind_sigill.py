"""A counting replay killed by SIGILL under valgrind (a build using instructions
valgrind cannot run: AVX-512 on this kind of host) fails with one line naming the build
and why, and the same build's other replays fail at once with it instead of each
spending its minutes (collect/valgrind.py sigill, cost/replay.py)."""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dbregress.collect import valgrind
from dbregress.cost import replay as replay_module
from dbregress.provision import Build, BuildSpec

# valgrind 3.19's log of a program that ran an AVX-512 instruction (its lines as it
# writes them)
LOG = """==4242== Callgrind, a call-graph generating cache profiler
==4242== Command: /x/dbregress-loadgen --spec s.json
vex amd64->IR: unhandled instruction bytes: 0x62 0xF1 0x7D 0x48 0x6F 0x5 0x0 0x0 0x0 0x0
vex amd64->IR:   REX=0 REX.W=0 REX.R=0 REX.X=0 REX.B=0
==4242== valgrind: Unrecognised instruction at address 0x5a1b2c3.
==4242==    at 0x5A1B2C3: rocksdb::crc32c::Extend(unsigned int, char const*) (crc32c.cc:1201)
==4242== Process terminating with default action of signal 4 (SIGILL)
==4242==  Illegal opcode at address 0x5A1B2C3
"""


def replays_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec_text: str, suffix: str = "{n}"
) -> Callable[[int], Any]:
    """Counting replay number n of one build (its counting patched by the test), in
    tmp_path/work{n} with its folder out{n} (or work and out with suffix "")."""
    monkeypatch.setattr(replay_module.method, "identity", lambda: {})
    spec = BuildSpec.parse(spec_text)
    build = Build(spec, tmp_path / "build", "10.2.1", {})
    column = SimpleNamespace(label="a", build=spec, settings={}, config="default")
    lab = SimpleNamespace(verdict=SimpleNamespace(cost_band=0.01))

    def replay(n: int) -> Any:
        tail = suffix.format(n=n)
        return replay_module.count_replay(
            lab,  # type: ignore[arg-type]
            replay_module.Replay(SimpleNamespace(name="kv"), column, n),  # type: ignore[arg-type]
            build,
            {},
            tmp_path / f"work{tail}",
            tmp_path / f"out{tail}",
            threading.Event(),
        )

    return replay


def test_a_log_saying_sigill_is_read_as_one_clause(tmp_path: Path) -> None:
    (tmp_path / "s1").mkdir()
    (tmp_path / "s1/valgrind.4242.log").write_text(LOG)
    why = valgrind.sigill(tmp_path)
    assert why is not None and "\n" not in why
    assert why.startswith("an AVX-512 (EVEX) instruction (bytes 0x62 0xF1 0x7D 0x48)")
    assert "in rocksdb::crc32c::Extend" in why and "that valgrind" in why
    (tmp_path / "s1/valgrind.4242.log").write_text(LOG.replace("signal 4 (SIGILL)", "exit"))
    assert valgrind.sigill(tmp_path) is None


@pytest.mark.skipif(
    not (shutil.which("valgrind") and shutil.which("gcc")), reason="no valgrind or gcc"
)
def test_a_real_sigill_under_valgrind_is_recognised(tmp_path: Path) -> None:
    """GFNI (on every AVX-512 host of this kind) is one of the sets valgrind 3.19
    cannot run; the program is built for it whatever the host, and valgrind decodes
    before it runs, so the log says SIGILL on any host."""
    program = tmp_path / "t.c"
    program.write_text(
        "#include <immintrin.h>\n"
        "int main(int argc, char **argv) { volatile int n = argc;\n"
        "  __m128i a = _mm_set1_epi32(n); a = _mm_gf2p8mul_epi8(a, a);\n"
        "  return _mm_cvtsi128_si32(a) == 7; }\n"
    )
    built = subprocess.run(
        ["gcc", "-O1", "-mgfni", "-msse4.2", "-o", str(tmp_path / "t"), str(program)],
        capture_output=True,
        check=False,
    )
    if built.returncode != 0:
        pytest.skip("gcc cannot build GFNI code here")
    subprocess.run(
        ["valgrind", f"--log-file={tmp_path}/valgrind.%p.log", str(tmp_path / "t")],
        capture_output=True,
        check=False,
    )
    why = valgrind.sigill(tmp_path)
    assert why is not None and "cannot run" in why and "(bytes 0x" in why


def test_a_build_killed_by_sigill_fails_every_replay_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def count(job: Any, say: Any) -> dict[str, Any]:
        calls.append(str(job.out))
        # where the real count has valgrind write it (explain/counting.py): the replay's
        # work directory, which the replay removes once it ends
        (Path(job.work) / "callgrind").mkdir(parents=True)
        (Path(job.work) / "callgrind" / "valgrind.4242.log").write_text(LOG)
        raise RuntimeError("the loadgen exited with signal 4")

    monkeypatch.setattr(replay_module.counting, "count", count)
    monkeypatch.setattr(replay_module, "_SIGILL", {})
    replay = replays_of(tmp_path, monkeypatch, "rocksdb@src:/t+rel_native")
    records = [replay(n) for n in (1, 2, 3)]
    assert len(calls) == 1  # the second and third never ran valgrind
    for record in records:
        assert record is not None and record["status"] == "failed"
        message = record["error"]["message"]
        assert "\n" not in message
        assert message.startswith("rocksdb@src:/t+rel_native: killed by SIGILL under valgrind")
        assert "AVX-512 (EVEX)" in message and "-mno-avx512f" in message
    assert "Illegal opcode" in (tmp_path / "out1" / "valgrind.4242.log").read_text()  # kept


# valgrind 3.19's log of a library whose debug information it cannot read (clang 14's
# DWARF 5, as rocksdb@src:'s rel_clang_lto wrote it before -gdwarf-4)
GAVE_UP = """==31959== Callgrind, a call-graph generating cache profiler
### unhandled dwarf2 abbrev form code 0x25
==31959== Valgrind: debuginfo reader: ensure_valid failed:
==31959== Valgrind:   during call to ML_(img_get)
==31959== Valgrind:   request for range [865650844, +4) exceeds
==31959== Valgrind:   valid image size of 28394096 for image:
==31959== Valgrind:   "/cache/rocksdb/src-x/lib/librocksdb.so.7.10.2"
==31959==
==31959== Valgrind: debuginfo reader: Possibly corrupted debuginfo file.
==31959== Valgrind: I can't recover.  Giving up.  Sorry.
"""


def test_a_replay_valgrind_gave_up_on_says_so_and_keeps_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It failed with "dbregress-loadgen exited with status 1 before the step finished"
    and nothing else: valgrind's own words were in the replay's work directory, removed
    with it."""

    def count(job: Any, say: Any) -> dict[str, Any]:
        (Path(job.work) / "callgrind").mkdir(parents=True)
        (Path(job.work) / "callgrind" / "valgrind.31959.log").write_text(GAVE_UP)
        (Path(job.work) / "01-fillseq.stderr").write_text("")
        raise RuntimeError("step fillseq: dbregress-loadgen exited with status 1")

    monkeypatch.setattr(replay_module.counting, "count", count)
    monkeypatch.setattr(replay_module, "_SIGILL", {})
    record = replays_of(tmp_path, monkeypatch, "rocksdb@src:/t+rel_clang_lto", "")(1)
    assert record is not None and record["status"] == "failed"
    message = record["error"]["message"]
    assert message.startswith("rocksdb@src:/t+rel_clang_lto: valgrind")
    assert "gave up" in message and "Possibly corrupted debuginfo file" in message
    assert (tmp_path / "out" / "valgrind.31959.log").is_file()
    assert (tmp_path / "out" / "01-fillseq.stderr").is_file()
    assert not (tmp_path / "work").exists()


def test_a_clang_flavor_writes_debug_information_valgrind_can_read() -> None:
    import tomllib
    from importlib import resources

    shipped = tomllib.loads(
        resources.files("dbregress.provision").joinpath("flavors.toml").read_text()
    )
    for engine, flavors in shipped.items():
        for name, r in flavors.items():
            if "clang" in str(r.get("cc", "")) + str(r.get("cxx", "")):
                assert "-gdwarf-4" in r["cflags"].split(), f"{engine}.{name}"
