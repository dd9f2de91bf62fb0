"""Real OS processes the harness starts and kills: each in a session of its own, so that a SIGKILL reaches
every process it started (a Spark stream's JVM, and its Python workers, which PySpark puts in a process group
of their own but not in a session of their own)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


def session_members(sid: int) -> list[int]:
    """The processes whose session id is ``sid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if len(fields) > 3 and int(fields[3]) == sid:
            found.append(int(entry.name))
    return found


#: the environment variable whose value marks every process of one chaos run, and what they start (inherited
#: through forks, execs and new sessions alike)
RUN_MARKER = "CHAOS_RUN_MARKER"


def marked_processes(marker: str) -> dict[int, str]:
    """The live processes whose environment carries ``RUN_MARKER=marker``, with their command lines."""
    needle = f"{RUN_MARKER}={marker}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to read
        if state != "Z":
            found[int(entry.name)] = command[:200]
    return found


@dataclass
class Proc:
    """One process the harness started: its kind (``producer``, ``stream-local``, ...), a name for the log,
    its output file, and how it ended."""

    kind: str
    name: str
    popen: subprocess.Popen
    log: Path
    started: float
    meta: dict = field(default_factory=dict)
    killed: bool = False      # we sent SIGKILL
    stopping: bool = False    # we sent SIGTERM (the command's own stop)
    reported: bool = False    # its end was logged

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def age(self) -> float:
        return time.monotonic() - self.started

    def sigkill(self) -> int:
        """SIGKILL every process of its session, until none is left; returns how many were killed."""
        self.killed = True
        killed: set[int] = set()
        for _ in range(100):  # a process may fork while we kill: look again until the session is empty
            members = session_members(self.pid)
            if not members and self.popen.poll() is not None:
                break
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(0.1)  # reaps our child (a zombie stays in /proc until then)
        return len(killed)

    def sigterm(self) -> None:
        """Ask it to stop (the commands finish their running work on SIGTERM)."""
        self.stopping = True
        with contextlib.suppress(ProcessLookupError):
            self.popen.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int | None:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def tail(self, lines: int = 5) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def last_error(self) -> str:
        """The line of its output that says what went wrong (an ``error:`` line, else the last line)."""
        try:
            text = [line for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return ""
        for line in reversed(text):
            if "error" in line.lower() or "Error" in line:
                return line.strip()[:400]
        return text[-1].strip()[:400] if text else ""


def start(kind: str, name: str, argv: list[str], env: dict[str, str], log_dir: Path, cwd: Path,
          **meta: object) -> Proc:
    """Start ``argv`` in a session of its own, its stdout and stderr into ``log_dir/<name>.log``."""
    log = log_dir / f"{name.replace('#', '-')}.log"
    with open(log, "ab") as out:
        popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                 cwd=cwd, start_new_session=True)
    return Proc(kind, name, popen, log, time.monotonic(), dict(meta))
