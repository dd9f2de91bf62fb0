"""A driver's Spark JVM dies with it, even when the driver is SIGKILLed while the JVM is still starting (the
chaos run's finding: a stream SIGKILLed 2.6 s after its start left its JVM running, parent gone, for good)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.spark

_DRIVER = """
import os, sys, time
from connector.spark.session import spark_session
spark_session("local[1]")
if sys.argv[1] == "fork" and os.fork() == 0:  # a forked helper holds every descriptor, the JVM's stdin pipe too
    time.sleep(600)
    os._exit(0)
time.sleep(600)
"""


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize(("kill_after", "fork"), [(0.5, "no"), (6.0, "no"), (6.0, "fork")],
                         ids=["while-starting", "once-started", "with-a-forked-child"])
def test_the_jvm_dies_with_a_sigkilled_driver(kill_after, fork):
    """Spark's own guard (the JVM exits at EOF on its stdin) fails once the driver has forked: the child keeps
    the pipe open. The parent-death signal does not depend on it."""
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, fork], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    jvm = None
    others: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while jvm is None and time.monotonic() < deadline:  # spark-submit's shell, which execs the JVM
            jvm = next(iter(_children(driver.pid)), None)
            time.sleep(0.05)
        assert jvm is not None, "the driver started no JVM"
        time.sleep(kill_after)
        others = [p for p in _children(driver.pid) if p != jvm]
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 30
        while _alive(jvm) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(jvm), f"the JVM (pid {jvm}) outlived its SIGKILLed driver"
    finally:
        driver.kill()
        for pid in [p for p in (jvm, *others) if p is not None and _alive(p)]:
            os.kill(pid, signal.SIGKILL)
