"""TLS material: a development certificate made on first start, and QUIC configurations.

QUIC always runs TLS 1.3 with ALPN `mark`. A server without a configured certificate makes
a self-signed EC P-256 one for localhost, 127.0.0.1 and ::1, and local clients trust it by
reading the same file (`$DEMARKUS_HOME/tls/dev-cert.pem`). A client that does not find it
(another home) refuses the certificate; `trust_advice` says what it trusted and what to pass.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
from pathlib import Path

import certifi
from aioquic.quic.configuration import QuicConfiguration
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from .protocol import ALPN

DEV_CERT = "dev-cert.pem"
DEV_KEY = "dev-key.pem"
WINDOW = 8 * 1024 * 1024
"""Flow-control windows large enough for a 1 MiB document plus metadata in one go."""
CRYPTO_ERROR = 0x100
"""QUIC closes a connection over a TLS alert with this code plus the alert's number
(RFC 9001 section 4.8)."""
CERTIFICATE_ALERTS = frozenset({42, 43, 44, 45, 46, 48})
"""TLS alerts that say a certificate was not accepted (RFC 8446 section 6.2): bad, unsupported,
revoked, expired, unknown certificate, and unknown CA."""


def demarkus_home(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("DEMARKUS_HOME") or Path.home() / ".mark")


def default_tls_dir(environ: dict[str, str] | None = None) -> Path:
    return demarkus_home(environ) / "tls"


def ensure_dev_certificate(directory: Path) -> tuple[Path, Path]:
    """Return (cert, key) in `directory`, creating a fresh pair when missing or expiring."""
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / DEV_CERT, directory / DEV_KEY
    if cert_path.exists() and key_path.exists():
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        if cert.not_valid_after_utc > dt.datetime.now(dt.UTC) + dt.timedelta(days=1):
            return cert_path, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "demarkus development")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("::1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    tmp_key = key_path.with_name(key_path.name + ".tmp")
    fd = os.open(tmp_key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    tmp_cert = cert_path.with_name(cert_path.name + ".tmp")
    tmp_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    os.replace(tmp_key, key_path)
    os.replace(tmp_cert, cert_path)
    return cert_path, key_path


def server_configuration(cert: Path, key: Path) -> QuicConfiguration:
    config = QuicConfiguration(
        is_client=False,
        alpn_protocols=[ALPN],
        max_data=WINDOW,
        max_stream_data=WINDOW,
        idle_timeout=60.0,
    )
    config.load_cert_chain(str(cert), str(key))
    return config


def client_configuration(
    *, ca: Path | None = None, insecure: bool = False, server_name: str | None = None
) -> QuicConfiguration:
    """Verify against `ca`, else the system store plus the local development certificate."""
    config = QuicConfiguration(
        is_client=True,
        alpn_protocols=[ALPN],
        max_data=WINDOW,
        max_stream_data=WINDOW,
        idle_timeout=30.0,
        server_name=server_name,
    )
    if insecure:
        config.verify_mode = ssl.CERT_NONE
        return config
    if ca is not None:
        config.load_verify_locations(cafile=str(ca))
    else:
        dev = default_tls_dir() / DEV_CERT
        if dev.exists():
            config.load_verify_locations(cafile=certifi.where(), cadata=dev.read_bytes())
    return config


def rejects_certificate(error_code: int) -> bool:
    """Whether a QUIC connection closed with `error_code` ended over a certificate."""
    return error_code - CRYPTO_ERROR in CERTIFICATE_ALERTS


def trust_advice(ca: Path | None) -> str:
    """What a client that refused an authority's certificate trusts, and how to trust it.

    The usual cause is a client started with another home than the development server's (MCP
    hosts often set their own $HOME), so it lacks that server's self-signed certificate.
    """
    if ca is not None:
        trusted = f"This client trusts only {ca} (--ca)"
    else:
        dev = default_tls_dir() / DEV_CERT
        trusted = f"This client trusts the public CAs and {dev}"
        if not dev.exists():
            trusted += ", which does not exist"
    return (
        f"{trusted}. Pass --ca FILE with the authority's certificate (a development authority "
        f"keeps it on its machine in $DEMARKUS_HOME/tls/{DEV_CERT}, by default "
        f"~/.mark/tls/{DEV_CERT}), or --insecure for a throwaway test."
    )
