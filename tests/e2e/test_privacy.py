"""Stored results never carry the environment's secrets, and servers stay private."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from dbregress.engines.process import prepare_workdir
from tests.e2e.conftest import cli_env, run_record

pytestmark = pytest.mark.engine

SECRETS = {
    "PGPASSWORD": "pg-secret-7f3a",
    "MYSQL_PWD": "my-secret-91c2",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-55de",
    "DBREGRESS_TEST_TOKEN": "token-secret-0b8e",
}


def _walk_json(value: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _walk_json(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _walk_json(v, f"{path}[{i}]")]
    return [(path, value)]


def test_results_hold_no_secret(tmp_path: Path, workdir: Path) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text(
        'name = "p"\nplacement = "same"\nwarmup_job = false\n'
        '[[column]]\nlabel = "pg"\nbuild = "postgres@17.2.0"\nconfig = "ci"\n'
        "[insert]\nload_rows = 2000\nwrite_rows = 200\nquery_seconds = 1\nwarmup_s = 0\n"
        'cleanup_wait_s = 0\nsteps = ["l.i0", "qr100"]\n'
    )
    out = subprocess.run(
        [sys.executable, "-m", "dbregress.cli.main", "run", str(lab)],
        cwd=tmp_path,
        env={**cli_env(workdir), **SECRETS},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    run, _ = run_record(tmp_path)
    files = [f for f in run.rglob("*") if f.is_file()]
    assert len(files) > 10
    for f in files:
        text = f.read_bytes().decode(errors="replace")
        for name, secret in SECRETS.items():
            assert secret not in text, f"{name}'s value is in {f}"
        if f.suffix == ".json":
            for where, value in _walk_json(json.loads(text)):
                if "password" in where.lower() or "secret" in where.lower():
                    assert value in (None, ""), f"{f}: {where} = {value!r}"
    for secret in SECRETS.values():
        assert secret not in out.stdout + out.stderr


def test_workdirs_are_private() -> None:
    base = Path(tempfile.mkdtemp(prefix="dbregress-private-", dir="/var/tmp"))
    base.chmod(0o755)  # as root the server runs as nobody, who must reach the workdir
    try:
        root = base / "w"
        private = [root / "data", root / "socket"]
        prepare_workdir(root, private, "test", Path("/usr/bin"))
        for d in (root, *private):
            mode = stat.S_IMODE(d.stat().st_mode)
            assert mode == 0o700, f"{d} is {oct(mode)}: others could read or write it"
    finally:
        shutil.rmtree(base)
