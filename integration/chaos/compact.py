"""A full major compaction of one table, as a process of its own (so the chaos run can SIGKILL it; the
compaction itself goes on in Accumulo, as it would after an operator's shell died):

    python -m integration.chaos.compact --cluster A --table exports
"""

from __future__ import annotations

import argparse
import sys
import time

from connector.clusters_config import cluster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", required=True, help="cluster name from the config file")
    parser.add_argument("--table", required=True)
    opts = parser.parse_args(argv)
    began = time.monotonic()
    with cluster(opts.cluster).connect() as conn:
        conn.compact_table(opts.table, flush=True, wait=True)  # every file of every tablet: deletes dropped
    print(f"compacted {opts.cluster}/{opts.table} in {time.monotonic() - began:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
