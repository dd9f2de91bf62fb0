"""Where the gateway's shared secret comes from: given, a file, or the environment (never a flag)."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import AccumuloSecurityError

SECRET_ENV = "ACCUMULO_GATEWAY_SECRET"
SECRET_FILE_ENV = "ACCUMULO_GATEWAY_SECRET_FILE"


def resolve_secret(shared_secret: str | None = None, secret_file: str | os.PathLike[str] | None = None) -> str:
    """The gateway's shared secret: given directly, read from a file, or from the environment."""
    if shared_secret:
        return shared_secret
    path = secret_file or os.environ.get(SECRET_FILE_ENV)
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise AccumuloSecurityError(f"cannot read the shared secret file {path}: {exc.strerror}") from None
        if not text:
            raise AccumuloSecurityError(f"the shared secret file {path} is empty")
        return text
    env = os.environ.get(SECRET_ENV)
    if env:
        return env
    raise AccumuloSecurityError(
        f"no shared secret: pass shared_secret=, or set {SECRET_ENV} or {SECRET_FILE_ENV}"
    )
