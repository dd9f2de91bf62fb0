"""Builds the Java gateway with Maven when its sources change, and makes java command lines for it."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from .common import HarnessError

ROOT = Path(__file__).resolve().parent.parent.parent
GATEWAY_DIR = ROOT / "integration" / "gateway"
IDL = ROOT / "connector" / "accumulo" / "proxy.thrift"
LAUNCHER = "exportconnector.gateway.Launcher"
GATEWAY_MAIN = "exportconnector.gateway.GatewayMain"  # the deployable jar's Main-Class
BENCH_WRITER = "exportconnector.gateway.BenchWriter"


def _sources_hash() -> str:
    h = hashlib.sha256()
    files = [GATEWAY_DIR / "pom.xml", IDL, *sorted((GATEWAY_DIR / "src").rglob("*"))]
    for f in files:
        if f.is_file():
            h.update(str(f.relative_to(ROOT)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def build_gateway(force: bool = False) -> str:
    """Build the gateway when its pom, sources or the IDL changed; return the classpath of the launcher
    (classes plus every dependency, the minicluster too). The deployable jar is ``gateway_jar()``."""
    target = GATEWAY_DIR / "target"
    stamp = target / ".build-hash"
    cp_file = target / "classpath.txt"
    digest = _sources_hash()
    jar_missing = not list(target.glob("accumulo-gateway-*-all.jar"))
    if force or not stamp.exists() or stamp.read_text() != digest or not cp_file.exists() or jar_missing:
        if shutil.which("mvn") is None:
            raise HarnessError("Maven (mvn) is not on PATH; install it (make deps does)")
        if shutil.which("thrift") is None:
            raise HarnessError("the thrift compiler is not on PATH; `apt-get install thrift-compiler` (make deps)")
        for args in (["package", "-DskipTests"],
                     ["dependency:build-classpath", "-Dmdep.outputFile=target/classpath.txt"]):
            proc = subprocess.run(["mvn", "-q", "-B", *args], cwd=GATEWAY_DIR, capture_output=True, text=True)
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
                raise HarnessError(f"gateway build failed (mvn {' '.join(args)}):\n{tail}")
        stamp.write_text(digest)
    return f"{target / 'classes'}{os.pathsep}{cp_file.read_text().strip()}"


def gateway_jar() -> Path:
    """The deployable gateway jar (``java -jar <jar> --config gateway.properties``), built by ``build_gateway``."""
    jars = sorted((GATEWAY_DIR / "target").glob("accumulo-gateway-*-all.jar"))
    if not jars:
        raise HarnessError("the gateway jar is missing: run build_gateway() (make gateway-jar)")
    return jars[-1]


def java_command(classpath: str, main: str, *args: str, heap: str = "1g", tmpdir: Path | None = None) -> list[str]:
    """``tmpdir``: the JVM's java.io.tmpdir, so what it leaves there (Accumulo's VFS cache) goes with it."""
    options = [f"-Djava.io.tmpdir={tmpdir}"] if tmpdir else []
    return ["java", f"-Xmx{heap}", "-XX:+UseSerialGC", *options, "-cp", classpath, main, *args]
