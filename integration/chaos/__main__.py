"""``python -m integration.chaos --minutes M --seed S``: start clusters A and B, run the fault schedule drawn
from the seed, print the log and the summary; exit status 0 on PASS, 1 on FAIL. The run folder (every
process's output, the log) is kept after a failure, removed after a pass unless ``--keep``."""

from __future__ import annotations

import argparse
import secrets
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from integration.harness import clusters

from .run import ChaosOptions, ChaosRun
from .schedule import draw_schedule


def _interrupt(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough: let the teardown finish
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m integration.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="minutes of faults (quiet points add to them)")
    parser.add_argument("--seed", type=int, help="the schedule's seed (default: a random one, printed first)")
    parser.add_argument("--words", type=int, default=ChaosOptions.words, help="the producers' shared vocabulary")
    parser.add_argument("--rate", type=float, default=ChaosOptions.producer_rate,
                        help="transactions per second of each producer")
    parser.add_argument("--keep-going", action="store_true", help="go on after a failed quiet point")
    parser.add_argument("--keep", action="store_true", help="keep the run folder after a pass too")
    parser.add_argument("--schedule-only", action="store_true", help="print the schedule and exit")
    parser.add_argument("--skews", metavar="AHEAD,BEHIND",
                        help="the two skewed producers' clocks, seconds ahead and behind (default: drawn, 120-300)")
    opts = parser.parse_args(argv)
    seed = opts.seed if opts.seed is not None else secrets.randbelow(1_000_000)
    print(f"chaos seed {seed} (reproduce: make chaos MINUTES={opts.minutes:g} SEED={seed})", flush=True)
    skews = None
    if opts.skews:
        try:
            ahead, behind = (float(x) for x in opts.skews.split(","))
        except ValueError:
            parser.error(f"--skews: give two numbers of seconds, AHEAD,BEHIND (got {opts.skews!r})")
        skews = (ahead, behind)
    schedule = draw_schedule(seed, opts.minutes, skews=skews)
    if opts.schedule_only:
        print(schedule.describe())
        for phase in schedule.phases:
            for a in phase.actions:
                print(f"  p{phase.index} +{a.at:6.1f}s {a.describe()}")
        return 0
    # SIGTERM (make interrupted, a CI time-out) unwinds like Ctrl-C: every process of the run and the clusters stop
    signal.signal(signal.SIGTERM, _interrupt)
    run_dir = Path(tempfile.mkdtemp(prefix=f"chaos-{seed}-"))
    began = time.monotonic()
    print("starting embedded clusters A and B ...", flush=True)
    with clusters(("a", "b")) as running:
        print(f"clusters up in {time.monotonic() - began:.0f}s", flush=True)
        run = ChaosRun(running, schedule, run_dir, ChaosOptions(words=opts.words, producer_rate=opts.rate,
                                                                 keep_going=opts.keep_going))
        passed = run.run()
    if passed and not opts.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    else:
        print(f"run folder kept: {run_dir} (chaos.log, logs/<process>.log)", flush=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
