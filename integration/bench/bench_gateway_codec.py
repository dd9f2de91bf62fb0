"""Benchmark: the gateways' CPU per drained entry with the generated Thrift code on every call vs the direct
``update`` and ``nextK`` paths (``EXPORTCONNECTOR_GATEWAY_CODEC``, see the gateway's DirectCalls).

Runs :mod:`bench_cpu_per_entry` ``--rounds`` times per codec in one process, alternating which codec goes
first (fresh clusters each time, so a busy machine weighs on both alike), and prints each run's gateway and
tablet server microseconds per entry with the load average, then the medians and a final ``ratio=`` line:
the direct path's gateway CPU per entry against the generic one's (< 1.0: the direct path is cheaper).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from integration.bench.bench_cpu_per_entry import run  # noqa: E402

CODEC_ENV = "EXPORTCONNECTOR_GATEWAY_CODEC"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    opts = parser.parse_args()
    gateways: dict[str, list[float]] = {"generic": [], "direct": []}
    for r in range(opts.rounds):
        for codec in (("generic", "direct") if r % 2 == 0 else ("direct", "generic")):
            os.environ[CODEC_ENV] = codec  # the launcher JVM inherits the environment
            load = os.getloadavg()[0]
            per_entry = run(opts.entries, opts.buckets)
            gateways[codec].append(per_entry["gateways"])
            print(f"RUN codec={codec} round={r} gateways={per_entry['gateways']:.2f} us/entry "
                  f"tablet_servers={per_entry['tablet servers']:.2f} us/entry "
                  f"load={load:.1f}->{os.getloadavg()[0]:.1f}", flush=True)
    os.environ.pop(CODEC_ENV, None)
    med = {codec: statistics.median(v) for codec, v in gateways.items()}
    for codec, values in gateways.items():
        print(f"{codec:>8}: gateways median {med[codec]:.2f} us/entry, runs "
              + ", ".join(f"{v:.2f}" for v in values))
    print(f"ratio={med['direct'] / med['generic']:.3f}")


if __name__ == "__main__":
    main()
