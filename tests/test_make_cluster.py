"""``make cluster`` (``python -m integration.harness``) says where every credential is, the root password the
Java programs need included, and never prints a secret."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from integration.harness.__main__ import ready_lines

from .conftest import ROOT


def _secrets(password_file: str, secret_file: str) -> list[str]:
    return [Path(password_file).read_text().strip(), Path(secret_file).read_text().strip()]


def _check_credential_lines(lines: list[str], password_file: str, secret_file: str,
                            client_files: list[str]) -> None:
    text = "\n".join(lines)
    for secret in _secrets(password_file, secret_file):
        assert len(secret) >= 16 and secret not in text, "a secret was printed"
    assert any("password is in " + password_file in line for line in lines), text
    assert any("gateway shared secret: " + secret_file in line for line in lines), text
    for f in client_files:
        assert f in text, text
    for f in (password_file, secret_file, *client_files):  # named files exist and only their owner reads them
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o600, f
    export = next(line.strip() for line in lines if "ACCUMULO_PASSWORD" in line)
    assert export == f'export ACCUMULO_PASSWORD="$(cat {password_file})"'
    # the printed line works in a shell (the value stays in the shell: compared there, never printed)
    check = subprocess.run(["bash", "-c", f'{export}; [ "$ACCUMULO_PASSWORD" = "$(cat {password_file})" ] && '
                                          '[ -n "$ACCUMULO_PASSWORD" ]'], capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout == ""


def test_ready_lines_name_every_credential_file_and_no_secret(accumulo, tmp_path):
    options = {c.name.upper(): c.gateway_options() for c in accumulo}
    lines = ready_lines(accumulo, options, tmp_path / "clusters.toml", 12.0)
    a = accumulo["a"]
    assert lines[0] == "clusters ready in 12s; Ctrl-C stops them"
    assert f"  A: gateway {a.gateway_host}:{a.gateway_port}  instance {a.instance}  zookeepers {a.zookeepers}  " \
           f"secret file {a.secret_file}" in lines
    assert any(f"Accumulo user {a.user}: its password is in" in line for line in lines)
    assert lines[-1] == f"  export ACCUMULO_EXPORT_CONFIG={tmp_path / 'clusters.toml'}"
    client_files = [c.gateway_client_properties for c in accumulo]
    assert all(client_files) and all(f.endswith("accumulo-client.properties") for f in client_files)
    _check_credential_lines(lines, a.password_file, a.secret_file, client_files)


@pytest.mark.cluster
@pytest.mark.slow
def test_make_cluster_prints_where_the_credentials_are(tmp_path):
    """The real command: one cluster, its lines read until the CLI line, then SIGTERM (it cleans up, exit 0)."""
    proc = subprocess.Popen([sys.executable, "-m", "integration.harness", "--clusters", "m"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if "ACCUMULO_EXPORT_CONFIG=" in line:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        reader.join(600)
        assert lines and "ACCUMULO_EXPORT_CONFIG=" in lines[-1], (lines, proc.poll())
        password_file = next(line.split("password is in ")[1].split(" ")[0] for line in lines
                             if "password is in" in line)
        secret_file = next(line.split("gateway shared secret: ")[1].split(" ")[0] for line in lines
                           if "gateway shared secret: " in line)
        client_line = next(line for line in lines if "'s gateways read user and password from " in line)
        client_files = client_line.split(" from ")[1].split(", ")
        _check_credential_lines(lines, password_file, secret_file, client_files)
        secrets = _secrets(password_file, secret_file)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    assert not any(s in err for s in secrets)
    assert not Path(password_file).exists(), "the state folder outlived the clusters"
