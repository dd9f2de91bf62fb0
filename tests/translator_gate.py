"""A translator that holds a drain at a known point, so a fault test injects its fault inside the drain however
fast the machine is: after ``after`` exports in a process, every translation waits until the test opens the
gate. The gate is a folder (``TRANSLATOR_GATE_DIR``, made when the test session imports this module and
inherited by the CLI's subprocesses and Spark's Python workers), so it holds in-process, CLI and Spark drains
alike. While it is not armed the translator is plain ``difference``."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from connector.export import SequencedExport
from connector.export.difference import difference

ENV = "TRANSLATOR_GATE_DIR"
#: the translator's name for a DrainJob or the CLI's --translator
GATED_DIFFERENCE = f"{__name__}:gated_difference"

# one gate per test process (each pytest-xdist worker has its own): its children inherit it with the owner's name
_OWNER_ENV = "TRANSLATOR_GATE_OWNER"
_owner = os.environ.get("PYTEST_XDIST_WORKER", "main")
if ENV not in os.environ or os.environ.get(_OWNER_ENV) != _owner:
    os.environ[ENV] = tempfile.mkdtemp(prefix="translator-gate-")
    os.environ[_OWNER_ENV] = _owner
    atexit.register(shutil.rmtree, os.environ[ENV], True)
_DIR = Path(os.environ[ENV])
_ARMED, _REACHED, _OPEN = _DIR / "armed", _DIR / "reached", _DIR / "open"

_lock = threading.Lock()
_counted: dict[str, int] = {}  # arming -> exports this process translated under it


def arm(after: int) -> None:
    """Let ``after`` exports per process through, then hold every translation until :func:`open_gate`."""
    _REACHED.unlink(missing_ok=True)
    _OPEN.unlink(missing_ok=True)
    _ARMED.write_text(f"{time.monotonic_ns()} {after}")


def wait_reached(timeout: float) -> bool:
    """True once a drain is held at the gate; False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not _REACHED.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def open_gate() -> None:
    """Let every held translation go on, and pass every later one (until armed again)."""
    _OPEN.touch()
    _ARMED.unlink(missing_ok=True)


def gated_difference(export: SequencedExport):  # noqa: ANN201 - the translator's own return type
    """``difference``, held at the gate once this process translated the armed number of exports."""
    try:
        arming, after = _ARMED.read_text().split()
    except (OSError, ValueError):
        return difference(export)
    with _lock:
        _counted[arming] = _counted.get(arming, 0) + 1
        hold = _counted[arming] > int(after)
    if hold:
        _REACHED.touch()
        deadline = time.monotonic() + 300
        while not _OPEN.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the test never opened the translator gate")
            time.sleep(0.02)
    return difference(export)
