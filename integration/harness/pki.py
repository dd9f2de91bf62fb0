"""Throwaway TLS material for tests: a CA, server and client certificates, and a gateway's TLS settings."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .common import HarnessError


@dataclass(frozen=True)
class GatewayTls:
    """TLS material of a gateway (PEM paths): its certificate and key, the CA clients verify it with, and
    optionally the CA its clients' certificates must chain to (then client certificates are required)."""

    cert_file: str
    key_file: str
    ca_file: str
    client_ca_file: str | None = None

    def properties(self) -> dict[str, str]:
        props = {"gateway.tls.enabled": "true", "gateway.tls.cert.file": self.cert_file,
                 "gateway.tls.key.file": self.key_file}
        if self.client_ca_file:
            props["gateway.tls.client.ca.file"] = self.client_ca_file
        return props


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise HarnessError(f"openssl {args[0]} failed: {proc.stderr.strip()}")


def make_test_pki(folder: Path, hosts: Sequence[str] = ("127.0.0.1", "localhost")) -> dict[str, Path]:
    """A throwaway PKI made with the openssl CLI (EC P-256, one day): ``ca``, ``server`` (for ``hosts``) and
    ``client`` signed by it, and an unrelated ``other_ca``. Returns PEM paths: ``<name>.pem``, ``<name>.key``."""
    if shutil.which("openssl") is None:
        raise HarnessError("the openssl command is needed to make test certificates")
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}

    def key(name: str) -> None:
        _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key",
                 cwd=folder)
        os.chmod(folder / f"{name}.key", 0o600)
        out[f"{name}_key"] = folder / f"{name}.key"
        out[name] = folder / f"{name}.pem"

    for ca in ("ca", "other_ca"):
        key(ca)
        _openssl("req", "-x509", "-new", "-key", f"{ca}.key", "-out", f"{ca}.pem", "-days", "1",
                 "-subj", f"/CN=export connector test {ca}", cwd=folder)
    san = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() else f"DNS:{h}" for h in hosts)
    for name, ext in (("server", f"subjectAltName={san}\nextendedKeyUsage=serverAuth"),
                      ("client", "extendedKeyUsage=clientAuth")):
        key(name)
        _openssl("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN=test {name}",
                 cwd=folder)
        (folder / f"{name}.ext").write_text(ext + "\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.pem", "-days", "1", "-extfile", f"{name}.ext", cwd=folder)
    return out
