"""``python -m integration.harness`` (``make cluster``): run embedded clusters in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Sequence

from .cluster import clusters
from .common import HarnessError
from .standalone import gateway_pool, pool_options


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run embedded Accumulo clusters until Ctrl-C.")
    parser.add_argument("--clusters", default="a,b", help="comma-separated cluster names (default a,b)")
    parser.add_argument("--dir", help="keep cluster data under this folder (default: a temporary one)")
    parser.add_argument("--gateways", type=int, default=1, choices=range(1, 9), metavar="N",
                        help="gateways per cluster (default 1); the extra ones run from the deployable jar")
    parser.add_argument("--tservers", type=int, default=1, choices=range(1, 17), metavar="N",
                        help="tablet servers per cluster (default 1)")
    opts = parser.parse_args(argv)
    started = time.monotonic()

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM cleans up like Ctrl-C: clusters stopped, state folder removed

    signal.signal(signal.SIGTERM, stop)
    try:
        with clusters(opts.clusters.split(","), data_dir=opts.dir, tservers=opts.tservers) as running, \
                contextlib.ExitStack() as extra:
            from connector.clusters_config import CONFIG_ENV, write_clusters

            options = {}
            for c in running:
                pool = extra.enter_context(gateway_pool(c, opts.gateways - 1)) if opts.gateways > 1 else []
                options[c.name.upper()] = (pool_options(pool, also=[f"{c.gateway_host}:{c.gateway_port}"])
                                           if pool else c.gateway_options())
            config = running.state_dir / "clusters.toml"
            write_clusters(config, options)
            print(f"clusters ready in {time.monotonic() - started:.0f}s; Ctrl-C stops them", flush=True)
            for c in running:
                where = ", ".join(options[c.name.upper()].hosts) or f"{c.gateway_host}:{c.gateway_port}"
                print(f"  {c.name.upper()}: gateway {where}  instance {c.instance}  zookeepers {c.zookeepers}  "
                      f"secret file {c.secret_file}", flush=True)
            print(f"point the CLI at them (clusters {', '.join(c.name.upper() for c in running)}):\n"
                  f"  export {CONFIG_ENV}={config}", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
            print("stopping clusters ...", flush=True)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
