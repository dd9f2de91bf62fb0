"""A command run again and again (``verify --every``): a standing check for systemd or Kubernetes, stopped by
SIGTERM or Ctrl-C."""

from __future__ import annotations

import time
from collections.abc import Callable

from .common import sigterm_as_event


def repeat_every(seconds: float, run: Callable[[], int], say: Callable[[str], None]) -> int:
    """Call ``run`` every ``seconds``, start to start (at once again if a run took longer), until SIGTERM or
    Ctrl-C; return the exit status of the last run. SIGTERM lets a run in progress finish (a repair is never
    cut in half) and then stops; Ctrl-C between runs stops at once, and during a run interrupts it
    (``KeyboardInterrupt`` goes on up: that run has no status)."""
    with sigterm_as_event() as terminated:
        while True:
            started = time.monotonic()
            status = run()
            if terminated.is_set():
                say(f"stopped by SIGTERM after a run (exit status {status})")
                return status
            wait = max(0.0, started + seconds - time.monotonic())
            say(f"next run in {wait:.0f} s (exit status of this one: {status}); SIGTERM or Ctrl-C stops")
            try:
                if terminated.wait(wait):
                    say(f"stopped by SIGTERM (exit status of the last run: {status})")
                    return status
            except KeyboardInterrupt:
                say(f"interrupted (exit status of the last run: {status})")
                return status
