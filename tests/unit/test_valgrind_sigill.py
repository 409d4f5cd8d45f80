"""A counting replay killed by SIGILL under valgrind (a build using instructions
valgrind cannot run: AVX-512 on this kind of host) fails with one line naming the build
and why, and the same build's other replays fail at once with it instead of each
spending its minutes (collect/valgrind.py sigill, cost/replay.py)."""

from __future__ import annotations

import shutil
import subprocess
import threading
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
        (Path(job.out) / "valgrind.4242.log").write_text(LOG)
        raise RuntimeError("the loadgen exited with signal 4")

    monkeypatch.setattr(replay_module.counting, "count", count)
    monkeypatch.setattr(replay_module.method, "identity", lambda: {})
    monkeypatch.setattr(replay_module, "_SIGILL", {})
    spec = BuildSpec.parse("rocksdb@src:/t+rel_native")
    build = Build(spec, tmp_path / "build", "10.2.1", {})
    column = SimpleNamespace(label="a", build=spec, settings={}, config="default")
    comparison = SimpleNamespace(name="kv")
    lab = SimpleNamespace(verdict=SimpleNamespace(cost_band=0.02))
    records = []
    for n in (1, 2, 3):
        one = replay_module.Replay(comparison, column, n)  # type: ignore[arg-type]
        records.append(
            replay_module.count_replay(
                lab,  # type: ignore[arg-type]
                one,
                build,
                {},
                tmp_path / f"work{n}",
                tmp_path / f"out{n}",
                threading.Event(),
            )
        )
    assert len(calls) == 1  # the second and third never ran valgrind
    for record in records:
        assert record is not None and record["status"] == "failed"
        message = record["error"]["message"]
        assert "\n" not in message
        assert message.startswith("rocksdb@src:/t+rel_native: killed by SIGILL under valgrind")
        assert "AVX-512 (EVEX)" in message and "-mno-avx512f" in message
