"""Child JVMs: wait for their ``READY {json}`` line, stop them gently then firmly."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from pathlib import Path

from .common import HarnessError, tail


def wait_for_ready(proc: subprocess.Popen, timeout: float, log_file: Path, what: str) -> dict:
    """Read the process's stdout until its ``READY {json}`` line; on timeout or exit, raise with the log tail."""
    found: dict = {}
    done = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("READY "):
                found.update(json.loads(line[len("READY "):]))
                break
        done.set()

    threading.Thread(target=reader, daemon=True).start()
    if not done.wait(timeout) or not found:
        stop_process(proc)
        state = "timed out" if not done.is_set() else f"exited with {proc.poll()}"
        raise HarnessError(f"{what} {state} before it was ready; last lines of {log_file}:\n{tail(log_file)}")
    return found


def stop_process(proc: subprocess.Popen, grace: float = 60.0) -> None:
    """Close its stdin and give it ``grace`` seconds to end, then SIGTERM, then (20 s later) SIGKILL."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(OSError):
        if proc.stdin:
            proc.stdin.close()  # the launcher stops on stdin EOF
    try:
        proc.wait(grace)
        return
    except subprocess.TimeoutExpired:
        pass
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
