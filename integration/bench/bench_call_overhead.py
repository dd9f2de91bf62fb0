"""Benchmark: the client's CPU per gateway call and per small scan, this tree against an earlier one, in one run on
one embedded cluster. A small scan (10 cells: createScanner, nextK, closeScanner) is what every poll of a drain,
a watermark or a purge makes; a plain call (``tableExists``) is the cost of one round trip through the retry
policy. The default earlier tree, ``ead56ec^``, is the one before the retry policy's fast path (``ead56ec``) and
the direct createScanner encoding (``9a6c17c``).

Each tree runs in a child process of its own (``PYTHONPATH`` = that tree), ``--rounds`` times, alternating which
goes first, and reports the child's process CPU (user + system) per operation; wall time per operation is printed
too (it includes the gateway and the tablet server). Prints each run, the medians and a final
``ratio=<this tree's CPU per scan / the earlier tree's>`` (< 1.0: this tree is cheaper). Run:
``.venv/bin/python integration/bench/bench_call_overhead.py [--before REV] [--ops N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NATIVE = "connector/_native.abi3.so"

#: run in a child with PYTHONPATH set to the tree under test; prints one JSON line
CHILD = r"""
import json, sys, time
from connector.accumulo import Connection, Range
host, port, secret, table, ops, tls = sys.argv[1:7]
port, ops = int(port), int(ops)
kwargs = {"tls_ca_file": tls} if tls else {}
conn = Connection(host, port, secret_file=secret, **kwargs)
rng = Range.rows(b"r0", b"r9")

def scans(n):
    for _ in range(n):
        assert sum(1 for _ in conn.scan(table, rng)) == 10

def calls(n):
    for _ in range(n):
        assert conn.table_exists(table)

out = {}
for name, work in (("scan", scans), ("call", calls)):
    work(200)  # warm: sockets, caches, the codec
    cpu, wall = time.process_time(), time.perf_counter()
    work(ops)
    out[name] = {"cpu_us": (time.process_time() - cpu) / ops * 1e6,
                 "wall_us": (time.perf_counter() - wall) / ops * 1e6}
conn.close()
print(json.dumps(out))
"""


def earlier_tree(rev: str, into: Path) -> Path:
    """A worktree of ``rev`` with this tree's native module (the crate is unchanged over the range measured)."""
    tree = into / "before"
    known = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                           capture_output=True)
    if known.returncode != 0:
        raise SystemExit(f"bench_call_overhead: revision {rev!r} is not in this clone (a shallow clone?): "
                         "pass --before with one that is")
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev], check=True,
                   capture_output=True)
    shutil.copy(ROOT / NATIVE, tree / NATIVE)
    return tree


def measure(tree: Path, cluster, table: str, ops: int) -> dict[str, dict[str, float]]:  # noqa: ANN001
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [sys.executable, "-c", CHILD, cluster.gateway_host, str(cluster.gateway_port), cluster.secret_file,
            table, str(ops), cluster.tls_ca_file or ""]
    out = subprocess.run(args, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default="ead56ec^", help="the earlier tree's git revision")
    parser.add_argument("--ops", type=int, default=5000, help="operations of each kind per run")
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from connector.accumulo import Mutation
    from integration.harness import clusters

    with tempfile.TemporaryDirectory() as tmp, clusters(["a"]) as running:
        before = earlier_tree(opts.before, Path(tmp))
        try:
            a = running["a"]
            with a.connect() as conn:
                conn.create_table("bench_calls", exist_ok=True)
                with conn.batch_writer("bench_calls") as writer:
                    writer.add_mutations(Mutation(f"r{i}").put("f", "q", f"v{i}") for i in range(10))
            runs: dict[str, list[dict[str, dict[str, float]]]] = {"before": [], "after": []}
            for r in range(opts.rounds):
                for name in (("before", "after") if r % 2 == 0 else ("after", "before")):
                    load = os.getloadavg()[0]
                    started = time.perf_counter()
                    got = measure(before if name == "before" else ROOT, a, "bench_calls", opts.ops)
                    runs[name].append(got)
                    print(f"RUN {name:>6} round={r} scan cpu={got['scan']['cpu_us']:.1f} us "
                          f"wall={got['scan']['wall_us']:.1f} us | call cpu={got['call']['cpu_us']:.1f} us "
                          f"wall={got['call']['wall_us']:.1f} us | {time.perf_counter() - started:.1f} s "
                          f"load={load:.1f}", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)],
                           capture_output=True)
    med = {name: {op: {m: statistics.median(run[op][m] for run in got) for m in ("cpu_us", "wall_us")}
                  for op in ("scan", "call")} for name, got in runs.items()}
    for name in ("before", "after"):
        print(f"{name:>6} ({opts.before if name == 'before' else 'this tree'}): median per scan "
              f"{med[name]['scan']['cpu_us']:.1f} us CPU, {med[name]['scan']['wall_us']:.1f} us wall; per call "
              f"{med[name]['call']['cpu_us']:.1f} us CPU, {med[name]['call']['wall_us']:.1f} us wall")
    print(f"ratio={med['after']['scan']['cpu_us'] / med['before']['scan']['cpu_us']:.3f}")


if __name__ == "__main__":
    main()
