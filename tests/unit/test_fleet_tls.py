"""The fleet's certificates and its listening rules: `dbregress fleet-certs` makes a CA
and a folder per host whose certificate the CA signed, secrets 0600; without TLS a
fleet's process neither listens nor connects beyond loopback; one worker per name per
host."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509

from dbregress.cli.main import main
from dbregress.fleet import tls
from dbregress.fleet.worker import dashboard_address, one_per_host, serve_scheduler
from dbregress.model.errors import LabError
from tests.unit.test_fleet import LAB


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_fleet_certs_makes_a_ca_and_a_signed_folder_per_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "certs"
    assert main(["fleet-certs", str(out), "--hosts", "coord,bench1,10.0.0.7"]) == 0
    said = capsys.readouterr().out
    assert "made the fleet CA" in said and "bench1: copy" in said and "ca-key.pem" in said
    ca = x509.load_pem_x509_certificate((out / "ca.pem").read_bytes())
    assert _mode(out / "ca-key.pem") == 0o600
    for host in ("coord", "bench1", "10.0.0.7"):
        folder = out / host
        assert sorted(p.name for p in folder.iterdir()) == ["ca.pem", "cert.pem", "key.pem"]
        assert _mode(folder / "key.pem") == 0o600
        assert _mode(folder) == 0o700
        assert not (folder / "ca-key.pem").exists()  # the CA's key stays where it was made
        cert = x509.load_pem_x509_certificate((folder / "cert.pem").read_bytes())
        cert.verify_directly_issued_by(ca)  # raises unless the fleet's CA signed it
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert host in [str(n) for n in names.get_values_for_type(x509.DNSName)] + [
            str(ip) for ip in names.get_values_for_type(x509.IPAddress)
        ]
        assert (folder / "ca.pem").read_bytes() == (out / "ca.pem").read_bytes()
        tls.security(folder)  # Dask accepts the folder as it is

    # Run again: a new host is signed by the same CA; an existing one is not replaced.
    assert main(["fleet-certs", str(out), "--hosts", "bench2"]) == 0
    assert "signed with the fleet CA" in capsys.readouterr().out
    new = x509.load_pem_x509_certificate((out / "bench2" / "cert.pem").read_bytes())
    new.verify_directly_issued_by(ca)
    assert main(["fleet-certs", str(out), "--hosts", "bench1"]) == 2
    err = capsys.readouterr().err
    assert "bench1" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(LabError, match="host names"):
        tls.make_certs(out, ["bad/name"])


def test_a_key_others_may_read_or_a_missing_file_is_refused(tmp_path: Path) -> None:
    tls.make_certs(tmp_path, ["h"])
    (tmp_path / "h" / "key.pem").chmod(0o644)
    with pytest.raises(LabError, match="chmod 600"):
        tls.security(tmp_path / "h")
    (tmp_path / "h" / "key.pem").chmod(0o600)
    (tmp_path / "h" / "ca.pem").unlink()
    with pytest.raises(LabError, match=r"no ca\.pem"):
        tls.security(tmp_path / "h")


def test_the_scheduler_refuses_to_listen_beyond_loopback_without_tls(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for host in ("0.0.0.0", "192.0.2.10", "bench1.example.org", ""):
        with pytest.raises(LabError, match="loopback only"):
            serve_scheduler(host, 8786, None, print, None)
    code = main(["scheduler", "--host", "0.0.0.0", "--dashboard", "none"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("Error: --host 0.0.0.0:") and "--tls" in err


def test_without_tls_workers_and_coordinators_stay_on_loopback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tls.scheduler_address("127.0.0.1:8786", None) == "tcp://127.0.0.1:8786"
    assert tls.scheduler_address("tcp://localhost:8786", None) == "tcp://localhost:8786"
    with pytest.raises(LabError, match="needs TLS"):
        tls.scheduler_address("tcp://10.1.2.3:8786", None)
    with pytest.raises(LabError, match="needs this host's certificates"):
        tls.scheduler_address("tls://10.1.2.3:8786", None)
    folder = tmp_path / "h"
    assert tls.scheduler_address("10.1.2.3:8786", folder) == "tls://10.1.2.3:8786"
    with pytest.raises(LabError, match="tls://HOST:PORT"):
        tls.scheduler_address("tcp://10.1.2.3:8786", folder)
    args = ["worker", "--scheduler", "tcp://127.0.0.1:1", "--listen", "0.0.0.0", "--name", "x"]
    assert main(args) == 2
    assert "--listen 0.0.0.0" in capsys.readouterr().err
    lab = tmp_path / "lab.toml"
    lab.write_text(LAB)
    results = tmp_path / "results"
    run = ["run", str(lab), "--scheduler", "tcp://10.1.2.3:8786", "--results", str(results)]
    assert main(run) == 2
    err = capsys.readouterr().err
    assert "needs TLS" in err and "fleet-certs" in err
    assert not list(results.glob("*/run.json"))  # refused before a run folder was made


def test_the_dashboard_listens_on_loopback_unless_asked() -> None:
    assert dashboard_address("8787") == "127.0.0.1:8787"
    assert dashboard_address(":8787") == "127.0.0.1:8787"
    assert dashboard_address("0.0.0.0:8787") == "0.0.0.0:8787"
    assert dashboard_address("none") is None
    with pytest.raises(LabError, match="--dashboard"):
        dashboard_address("web")


def test_a_second_worker_of_one_name_on_a_host_is_refused(tmp_path: Path) -> None:
    with one_per_host("w1", tmp_path):
        refused = pytest.raises(LabError, match="a worker named w1 already runs on this host")
        with refused, one_per_host("w1", tmp_path):
            pass
        with one_per_host("w2", tmp_path):  # another name is another worker
            pass
    with one_per_host("w1", tmp_path):  # the first one gone, its name is free again
        pass
