"""A translator for the Spark-cluster test, shipped to executors with ``--py-files``: the Python worker that
makes the ``KILL_AT``-th call (counted per process) kills itself with SIGKILL, as a crashed worker would, once
per test (a marker file named by WORKER_KILLER_MARKER); every other call translates as ``difference`` does."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable

from connector.export import SequencedExport
from connector.export.core import CellChange
from connector.export.difference import difference

KILL_AT = 150
_calls = 0


def kill_once(export: SequencedExport) -> Iterable[CellChange]:
    global _calls
    _calls += 1
    marker = os.environ.get("WORKER_KILLER_MARKER")
    if marker and _calls == KILL_AT:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass
        else:
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)
    return difference(export)
