"""Mutual TLS for a fleet: its certificates, and the rules of who may listen where.

A fleet's processes run code for each other (a unit is a Python function the coordinator
sends; a worker runs it as the user it runs as, often root on a benchmark host), so
anyone who can talk to the scheduler can run code on every host. With TLS, every
connection (coordinator, scheduler, worker, in both directions) is encrypted and both
ends show a certificate signed by the fleet's own CA: a process without one, or with one
of another CA, is refused at the handshake.

`dbregress fleet-certs DIR --hosts a,b,c` makes the CA (DIR/ca.pem, and its key
DIR/ca-key.pem, which never leaves the machine that made it) and one folder per host
(DIR/<host>/: ca.pem, cert.pem, key.pem) to copy to that host; every dbregress process
there (scheduler, worker, coordinator) uses it: `--tls DIR/<host>` or the environment
variable DBREGRESS_FLEET_TLS. Without TLS, a fleet stays on this machine's loopback.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import socket
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dbregress.model.errors import LabError

ENV = "DBREGRESS_FLEET_TLS"
CA_CERT = "ca.pem"
CA_KEY = "ca-key.pem"
CERT = "cert.pem"
KEY = "key.pem"
CA_DAYS = 3650
HOST_DAYS = 825
HOST_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
ROLES = ("client", "scheduler", "worker")


def tls_dir(given: Path | None) -> Path | None:
    """The folder of this host's certificates: `--tls DIR`, else $DBREGRESS_FLEET_TLS,
    else none (no TLS)."""
    if given is not None:
        return given
    env = os.environ.get(ENV, "").strip()
    return Path(env) if env else None


def _check_dir(folder: Path) -> None:
    what = f"--tls {folder} (or ${ENV})"
    if not folder.is_dir():
        raise LabError(f"{what}: no such folder; make one with `dbregress fleet-certs`")
    for name in (CA_CERT, CERT, KEY):
        if not (folder / name).is_file():
            raise LabError(
                f"{what}: no {name} there; give the host's folder that `dbregress "
                "fleet-certs` made (ca.pem, cert.pem, key.pem)"
            )
    mode = (folder / KEY).stat().st_mode & 0o777
    if mode & 0o077:
        raise LabError(
            f"{what}: {KEY} may be read by others (mode {mode:o}): `chmod 600 {folder / KEY}`"
        )


def security(folder: Path) -> Any:
    """Dask's Security for this host: the fleet's CA, this host's certificate and key in
    every role (it may run the scheduler, a worker and the coordinator), and no
    connection without TLS."""
    from distributed.security import Security

    _check_dir(folder)
    ca, cert, key = (str(folder / n) for n in (CA_CERT, CERT, KEY))
    roles = {f"tls_{r}_cert": cert for r in ROLES} | {f"tls_{r}_key": key for r in ROLES}
    return Security(tls_ca_file=ca, require_encryption=True, **roles)  # type: ignore[no-untyped-call]


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def scheduler_address(address: str, tls: Path | None) -> str:
    """The scheduler's address as the coordinator and the workers reach it: `tls://` with
    certificates (a bare HOST:PORT gets it), `tcp://` without them and only on loopback."""
    scheme = address.split("://", 1)[0] if "://" in address else None
    if scheme not in (None, "tcp", "tls"):
        raise LabError(f"--scheduler {address}: give tls://HOST:PORT (or tcp:// on loopback)")
    if tls is not None:
        if scheme == "tcp":
            raise LabError(f"--scheduler {address}: with --tls the scheduler is at tls://HOST:PORT")
        return address if scheme == "tls" else f"tls://{address}"
    if scheme == "tls":
        raise LabError(
            f"--scheduler {address}: a tls:// scheduler needs this host's certificates: give "
            f"--tls DIR (or set ${ENV}); see docs/fleet.md"
        )
    full = address if scheme else f"tcp://{address}"
    host = urlsplit(full).hostname or ""
    if not is_loopback(host):
        raise LabError(
            f"--scheduler {address}: a fleet beyond this machine's loopback needs TLS (without "
            "it, anyone on the network could run code on every host): make certificates with "
            "`dbregress fleet-certs` and give --tls DIR; see docs/fleet.md"
        )
    return full


def require_loopback_without_tls(option: str, host: str, tls: Path | None) -> None:
    """A process of the fleet listens beyond loopback only with TLS."""
    if tls is None and not is_loopback(host):
        raise LabError(
            f"{option} {host or '(all interfaces)'}: without TLS a fleet's process listens on "
            "loopback only (anyone who reaches it could run code on every host): give --tls "
            "DIR (certificates from `dbregress fleet-certs`) or listen on 127.0.0.1"
        )


def probe(address: str, folder: Path, timeout: float = 10.0) -> None:
    """Try one TLS handshake with the scheduler before Dask does: a certificate the
    other end refuses is a clear error here, where Dask would retry it for ever. A
    scheduler not (yet) listening is not an error: Dask waits for it."""
    parts = urlsplit(address)
    host, port = parts.hostname or "127.0.0.1", parts.port or 8786
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(folder / CA_CERT))
    ctx.check_hostname = False  # addresses are often IPs; the fleet's CA is the check
    ctx.load_cert_chain(str(folder / CERT), str(folder / KEY))
    try:
        raw = socket.create_connection((host, port), timeout=timeout)
    except OSError:
        return
    try:
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            # TLS 1.3: the scheduler judges our certificate after our side of the
            # handshake; a refusal arrives as an alert on the first read. Dask's peer
            # speaks first once it accepted us.
            s.settimeout(timeout)
            s.recv(1)
    except ssl.SSLCertVerificationError as e:
        raise LabError(
            f"the scheduler at {address} shows a certificate not signed by this host's CA "
            f"({folder / CA_CERT}): {e.verify_message}; is it another fleet's scheduler?"
        ) from None
    except ssl.SSLError as e:
        raise LabError(
            f"the scheduler at {address} refused this host's certificate "
            f"({folder / CERT}: {e.reason or e}): give the folder `dbregress fleet-certs` made "
            "for this host with the fleet's CA"
        ) from None
    except (OSError, TimeoutError):
        return


# --- making the certificates ------------------------------------------------------------


def _write_secret(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    path.chmod(0o600)  # whatever the umask


def _write_public(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o644)


def _name(common: str) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "dbregress fleet"),
            x509.NameAttribute(NameOID.COMMON_NAME, common),
        ]
    )


def _key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _pem_cert(cert: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(cert.public_bytes(serialization.Encoding.PEM))


def _make_ca(folder: Path) -> tuple[Any, Any]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    name = _name(f"dbregress fleet CA {folder.resolve().name}")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_secret(folder / CA_KEY, _pem_key(key))
    _write_public(folder / CA_CERT, _pem_cert(cert))
    return key, cert


def _load_ca(folder: Path) -> tuple[Any, Any]:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_private_key((folder / CA_KEY).read_bytes(), None)
        cert = x509.load_pem_x509_certificate((folder / CA_CERT).read_bytes())
    except (OSError, ValueError) as e:
        raise LabError(f"{folder}: cannot read its CA ({CA_CERT}, {CA_KEY}): {e}") from None
    return key, cert


def _host_cert(host: str, ca_key: Any, ca_cert: Any) -> tuple[Any, Any]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    alt: list[x509.GeneralName] = [x509.DNSName("localhost")]
    try:
        alt.insert(0, x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        alt.insert(0, x509.DNSName(host))
    alt.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(host))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=HOST_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        # Every process of a host both listens and connects: server and client.
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def make_certs(folder: Path, hosts: list[str]) -> tuple[bool, list[Path]]:
    """The fleet's CA in `folder` (made unless there), and a folder per host in it with
    the CA's certificate, the host's certificate and its key. Whether the CA is new, and
    the hosts' folders."""
    bad = [h for h in hosts if not HOST_NAME.match(h)]
    if bad or not hosts:
        raise LabError(
            f"--hosts {','.join(hosts)}: give host names (letters, digits, '.', '-'), "
            "comma-separated, e.g. --hosts coord,bench1,bench2"
        )
    if len(set(hosts)) != len(hosts):
        raise LabError(f"--hosts {','.join(hosts)}: a host is named twice")
    if any(h in (CA_CERT, CA_KEY) for h in hosts):
        raise LabError(f"--hosts: {CA_CERT} and {CA_KEY} are the CA's files, not host names")
    taken = [h for h in hosts if (folder / h).exists()]
    if taken:
        raise LabError(
            f"{folder}: certificates for {', '.join(taken)} are there already; remove their "
            "folders to make new ones"
        )
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    has_ca = (folder / CA_KEY).exists() or (folder / CA_CERT).exists()
    ca_key, ca_cert = _load_ca(folder) if has_ca else _make_ca(folder)
    made = []
    for host in hosts:
        key, cert = _host_cert(host, ca_key, ca_cert)
        own = folder / host
        own.mkdir(mode=0o700)
        own.chmod(0o700)
        _write_public(own / CA_CERT, _pem_cert(ca_cert))
        _write_public(own / CERT, _pem_cert(cert))
        _write_secret(own / KEY, _pem_key(key))
        made.append(own)
    return not has_ca, made
