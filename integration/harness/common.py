"""What every part of the harness shares: its error, private files and log tails."""

from __future__ import annotations

import os
from pathlib import Path


class HarnessError(RuntimeError):
    """The embedded clusters could not be built or started; the message says why."""


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with mode 0600 (it may be a secret)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def write_properties(path: Path, values: dict[str, str], comment: str) -> None:
    """A Java .properties file with mode 0600 (it may name secret files, or hold Accumulo's auth.token)."""
    def esc(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\:").replace("=", "\\=")

    write_private(path, f"# {comment}\n" + "".join(f"{esc(k)}={esc(v)}\n" for k, v in values.items()))


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
