"""The devcluster's own certificate authorities, component certificates and minted credentials.

Everything is made with the openssl CLI: P-256 keys, certificates valid for ten years. The cluster
CA signs the apiserver's serving certificate and every client certificate; Kubernetes reads a
client certificate's CN as the user name and each O as a group. A second CA, as kubeadm sets up,
signs only the front-proxy client certificate the apiserver uses towards aggregated APIs, so that
its request-header authentication is configured and components stop complaining about it.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CERT_VALIDITY_DAYS = 3650
_REQ_CONFIG = "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n"
_SUBJECT_SPECIAL = re.compile(r"([\\/+=,])")


@dataclass(frozen=True)
class KeyPair:
    """A certificate (or public key) and its private key on disk."""

    cert: Path
    key: Path

    def exists(self) -> bool:
        return self.cert.exists() and self.key.exists()


def _openssl(args: list[str], config: str = _REQ_CONFIG) -> None:
    """Run openssl with a throwaway config file, passed as {config} in args."""
    with tempfile.NamedTemporaryFile("w", suffix=".cnf") as config_file:
        config_file.write(config)
        config_file.flush()
        command = ["openssl", *(config_file.name if arg == "{config}" else arg for arg in args)]
        subprocess.run(command, check=True, capture_output=True, text=True)


def subject(common_name: str, organizations: list[str] | tuple[str, ...] = ()) -> str:
    """Build an openssl -subj string with one O per group, escaping openssl's separators."""
    if not common_name:
        raise ValueError("a certificate needs a non-empty common name")

    def escape(value: str) -> str:
        return _SUBJECT_SPECIAL.sub(r"\\\1", value)

    parts = [f"/O={escape(org)}" for org in organizations]
    return "".join(parts) + f"/CN={escape(common_name)}"


def _new_key(path: Path) -> None:
    _openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(path)])
    path.chmod(0o600)


def ensure_ca(
    pki_dir: Path, name: str = "ca", common_name: str = "gpuportal-devcluster-ca"
) -> KeyPair:
    """Create a CA once (<name>.crt/.key in pki_dir); later calls return the existing one."""
    pki_dir.mkdir(parents=True, exist_ok=True)
    ca = KeyPair(cert=pki_dir / f"{name}.crt", key=pki_dir / f"{name}.key")
    if ca.exists():
        return ca
    _new_key(ca.key)
    extensions = (
        "[ext]\nbasicConstraints = critical, CA:TRUE\n"
        "keyUsage = critical, keyCertSign, cRLSign, digitalSignature\n"
        "subjectKeyIdentifier = hash\n"
    )
    validity = ["-sha256", "-days", str(CERT_VALIDITY_DAYS)]
    _openssl(
        [
            "req",
            "-x509",
            "-new",
            "-key",
            str(ca.key),
            *validity,
            "-subj",
            f"/CN={common_name}",
            "-config",
            "{config}",
            "-extensions",
            "ext",
            "-out",
            str(ca.cert),
        ],
        config=_REQ_CONFIG + extensions,
    )
    return ca


def issue(
    ca: KeyPair,
    out_dir: Path,
    name: str,
    common_name: str,
    organizations: list[str] | tuple[str, ...] = (),
    server_names: list[str] | tuple[str, ...] = (),
    server_ips: list[str] | tuple[str, ...] = (),
) -> KeyPair:
    """Issue a certificate signed by the CA; with SANs it is also a serving certificate."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pair = KeyPair(cert=out_dir / f"{name}.crt", key=out_dir / f"{name}.key")
    csr = out_dir / f"{name}.csr"
    _new_key(pair.key)
    _openssl(
        [
            "req",
            "-new",
            "-key",
            str(pair.key),
            "-subj",
            subject(common_name, organizations),
            "-config",
            "{config}",
            "-out",
            str(csr),
        ]
    )
    serving = bool(server_names or server_ips)
    extensions = (
        "[ext]\nbasicConstraints = critical, CA:FALSE\n"
        "keyUsage = critical, digitalSignature, keyEncipherment\n"
        f"extendedKeyUsage = {'serverAuth, clientAuth' if serving else 'clientAuth'}\n"
    )
    if serving:
        alt_names = [f"DNS:{dns}" for dns in server_names] + [f"IP:{ip}" for ip in server_ips]
        extensions += f"subjectAltName = {', '.join(alt_names)}\n"
    signing = ["-CA", str(ca.cert), "-CAkey", str(ca.key), "-set_serial", _random_serial()]
    _openssl(
        [
            "x509",
            "-req",
            "-in",
            str(csr),
            *signing,
            "-sha256",
            "-days",
            str(CERT_VALIDITY_DAYS),
            "-extfile",
            "{config}",
            "-extensions",
            "ext",
            "-out",
            str(pair.cert),
        ],
        config=extensions,
    )
    csr.unlink()
    return pair


def ensure_issued(
    ca: KeyPair,
    out_dir: Path,
    name: str,
    common_name: str,
    organizations: list[str] | tuple[str, ...] = (),
    server_names: list[str] | tuple[str, ...] = (),
    server_ips: list[str] | tuple[str, ...] = (),
) -> KeyPair:
    """Like issue(), but keep a certificate made by an earlier start."""
    pair = KeyPair(cert=out_dir / f"{name}.crt", key=out_dir / f"{name}.key")
    if pair.exists():
        return pair
    return issue(ca, out_dir, name, common_name, organizations, server_names, server_ips)


def ensure_service_account_keys(pki_dir: Path) -> KeyPair:
    """The key pair the apiserver signs service-account tokens with (public key in .cert)."""
    pair = KeyPair(cert=pki_dir / "sa.pub", key=pki_dir / "sa.key")
    if pair.exists():
        return pair
    _new_key(pair.key)
    _openssl(["ec", "-in", str(pair.key), "-pubout", "-out", str(pair.cert)])
    return pair


def _random_serial() -> str:
    return "0x" + secrets.token_hex(16)
