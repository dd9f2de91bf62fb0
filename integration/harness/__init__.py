"""Real Accumulo on one machine: builds the gateway, starts MiniAccumuloClusters with their gateways.

Use ``clusters(["a", "b"])`` as a context manager (tests use the session fixture in tests/conftest.py), or
``python -m integration.harness`` (``make cluster``) to keep clusters running in the foreground until
Ctrl-C. Secrets are generated per run, passed to the launcher through its environment and a 0600 file,
and never printed.

Every entry point takes an Accumulo line (``clusters(..., line="3.0")``, ``build_gateway(line=...)``,
``gateway_jar(line)``); None means ``$ACCUMULO_LINE`` (``make cluster ACCUMULO=3.0``), else 2.1.

Modules: ``build`` (Maven: the gateway and harness modules of ``integration/gateway``, java command lines,
the native map library), ``pki`` (test certificates),
``processes`` (child JVMs), ``cluster`` (the launcher and its clusters), ``standalone`` (a gateway from the
deployable jar), ``common``.
"""

from .build import (
    BENCH_WRITER,
    GATEWAY_DIR,
    GATEWAY_MAIN,
    GATEWAY_MODULE,
    HARNESS_MODULE,
    IDL,
    LAUNCHER,
    LINE_ENV,
    LINES,
    NATIVE_DIR,
    NATIVE_LIB,
    ROOT,
    ROW_TRANSACTION_EXAMPLE,
    accumulo_line,
    build_gateway,
    build_native_maps,
    gateway_jar,
    java_command,
    native_dir,
    pom_property,
)
from .cluster import Cluster, Clusters, clusters
from .common import HarnessError, write_properties
from .pki import GatewayTls, make_test_pki
from .processes import stop_process, wait_for_ready
from .standalone import StandaloneGateway, gateway_pool, pool_options

__all__ = [
    "BENCH_WRITER", "GATEWAY_DIR", "GATEWAY_MAIN", "GATEWAY_MODULE", "HARNESS_MODULE", "IDL", "LAUNCHER", "LINES",
    "LINE_ENV", "NATIVE_DIR", "NATIVE_LIB", "ROOT", "ROW_TRANSACTION_EXAMPLE", "Cluster", "Clusters", "GatewayTls",
    "HarnessError", "StandaloneGateway", "accumulo_line", "build_gateway", "build_native_maps", "clusters",
    "gateway_jar", "gateway_pool", "java_command", "make_test_pki", "native_dir", "pom_property", "pool_options",
    "stop_process", "wait_for_ready", "write_properties",
]
