"""The gateways every process of the chaos run talks through: a pool of standalone gateways per cluster (each
its own JVM), named together in the run's clusters.toml, so a SIGKILLed gateway is survived the way a
deployment survives it: clients fail over to the other, and the killed one comes back on the same port.

The harness's own checks go through the launcher's gateways, which are never killed."""

from __future__ import annotations

from pathlib import Path

from connector.accumulo.options import GatewayOptions
from connector.clusters_config import write_clusters
from integration.harness import Clusters, StandaloneGateway
from integration.harness.standalone import start_all

#: the clusters.toml name of each embedded cluster
CONFIG_NAMES = {"a": "A", "b": "B"}


class GatewayPools:
    """``per_cluster`` standalone gateways for each of clusters a and b."""

    def __init__(self, clusters: Clusters, per_cluster: int = 2) -> None:
        self.clusters = clusters
        self.pools = {name: [StandaloneGateway(clusters[name]) for _ in range(per_cluster)] for name in CONFIG_NAMES}

    def start(self) -> None:
        """Start every gateway (side by side); raises the first failure."""
        start_all([g for pool in self.pools.values() for g in pool], timeout=180)

    def write_config(self, path: Path) -> None:
        """The run's clusters.toml: A and B each as the pool of their gateways (the secret stays in its file)."""
        write_clusters(path, {CONFIG_NAMES[name]: GatewayOptions.pool([g.address for g in pool],
                                                                       secret_file=pool[0].cluster.secret_file)
                              for name, pool in self.pools.items()})

    def gateway(self, cluster: str, pick: int) -> tuple[int, StandaloneGateway]:
        pool = self.pools[cluster]
        return pick % len(pool), pool[pick % len(pool)]

    def alive(self, g: StandaloneGateway) -> bool:
        return g.proc is not None and g.proc.poll() is None

    def live_count(self, cluster: str) -> int:
        return sum(1 for g in self.pools[cluster] if self.alive(g))

    def dead(self) -> list[tuple[str, int, StandaloneGateway]]:
        return [(c, i, g) for c, pool in self.pools.items() for i, g in enumerate(pool) if not self.alive(g)]

    def stop(self) -> None:
        for pool in self.pools.values():
            for g in pool:
                g.stop()
