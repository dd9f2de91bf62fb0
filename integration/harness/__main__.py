"""``python -m integration.harness`` (``make cluster``): run embedded clusters in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import contextlib
import shlex
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .build import DEFAULT_LINE, LINE_ENV, LINES
from .cluster import Clusters, clusters
from .common import HarnessError
from .standalone import StandaloneGateway, gateway_pool, pool_options


def ready_lines(running: Clusters, options: Mapping[str, Any], config: Path, seconds: float,
                pools: Mapping[str, Sequence[StandaloneGateway]] | None = None) -> list[str]:
    """What ``make cluster`` prints once the clusters serve: each cluster's gateways, where every credential
    is (files only: no secret is ever printed), how the Java programs get the password, and the line that
    points the CLI at the clusters. ``options``: each cluster's GatewayOptions, by upper-case name;
    ``pools``: the extra standalone gateways (``--gateways``), by the same names."""
    from connector.clusters_config import CONFIG_ENV

    names = [c.name.upper() for c in running]
    first = next(iter(running))
    lines = [f"clusters ready in {seconds:.0f}s; Ctrl-C stops them"]
    if first.accumulo_line != DEFAULT_LINE:
        lines[0] = f"Accumulo {first.accumulo_server or first.accumulo_line} {lines[0]}"
    for c in running:
        where = ", ".join(options[c.name.upper()].hosts) or f"{c.gateway_host}:{c.gateway_port}"
        lines.append(f"  {c.name.upper()}: gateway {where}  instance {c.instance}  zookeepers {c.zookeepers}  "
                     f"secret file {c.secret_file}")
    lines.append("credentials (in files of mode 0600, removed when the clusters stop; never printed):")
    if first.kerberos:
        lines.append(f"  Kerberos (KDC {first.kerberos['kdc']}, realm {first.kerberos['realm']}, krb5.conf "
                     f"{first.kerberos['krb5_conf']}): Accumulo user {first.user}, its keytab is "
                     f"{first.kerberos['keytabs']['root']} (every cluster)")
    else:
        lines.append(f"  Accumulo user {first.user}: its password is in {first.password_file} (every cluster)")
    lines.append(f"  gateway shared secret: {first.secret_file} (every gateway; clusters.toml names it)")
    for c in running:
        files = [c.gateway_client_properties] if c.gateway_client_properties else []
        files += [str(g.client_file) for g in (pools or {}).get(c.name.upper(), ())]
        if files:
            lines.append(f"  {c.name.upper()}'s gateways read user and {'keytab' if c.kerberos else 'password'} "
                         f"from {', '.join(files)}")
    if not first.kerberos:  # the Java programs log in with a password only
        lines.append("the Java programs (RowTransactionExample, BenchWriter) take the password from the environment:")
        lines.append(f'  export ACCUMULO_PASSWORD="$(cat {shlex.quote(first.password_file)})"')
    lines.append(f"point the CLI at them (clusters {', '.join(names)}):")
    lines.append(f"  export {CONFIG_ENV}={config}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run embedded Accumulo clusters until Ctrl-C.")
    parser.add_argument("--clusters", default="a,b", help="comma-separated cluster names (default a,b)")
    parser.add_argument("--dir", help="keep cluster data under this folder (default: a temporary one)")
    parser.add_argument("--gateways", type=int, default=1, choices=range(1, 9), metavar="N",
                        help="gateways per cluster (default 1); the extra ones run from the deployable jar")
    parser.add_argument("--tservers", type=int, default=1, choices=range(1, 17), metavar="N",
                        help="tablet servers per cluster (default 1)")
    parser.add_argument("--line", choices=LINES, default=None,
                        help=f"Accumulo line of the clusters and gateways (default ${LINE_ENV}, else 2.1)")
    parser.add_argument("--kerberos", action="store_true",
                        help="start a KDC and Kerberize the clusters; the gateways log in from a keytab")
    opts = parser.parse_args(argv)
    started = time.monotonic()

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM cleans up like Ctrl-C: clusters stopped, state folder removed

    signal.signal(signal.SIGTERM, stop)
    try:
        with clusters(opts.clusters.split(","), data_dir=opts.dir, tservers=opts.tservers,
                      kerberos=opts.kerberos, line=opts.line) as running, \
                contextlib.ExitStack() as extra:
            from connector.clusters_config import write_clusters

            options = {}
            pools: dict[str, list[StandaloneGateway]] = {}
            for c in running:
                pool = extra.enter_context(gateway_pool(c, opts.gateways - 1)) if opts.gateways > 1 else []
                pools[c.name.upper()] = pool
                options[c.name.upper()] = (pool_options(pool, also=[f"{c.gateway_host}:{c.gateway_port}"])
                                           if pool else c.gateway_options())
            config = running.state_dir / "clusters.toml"
            write_clusters(config, options)
            for line in ready_lines(running, options, config, time.monotonic() - started, pools):
                print(line, flush=True)
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
