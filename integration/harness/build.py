"""Builds the Java gateway with Maven when its sources change, and makes java command lines for it."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

from .common import HarnessError

ROOT = Path(__file__).resolve().parent.parent.parent
GATEWAY_DIR = ROOT / "integration" / "gateway"
IDL = ROOT / "connector" / "accumulo" / "proxy.thrift"
LAUNCHER = "exportconnector.gateway.Launcher"
GATEWAY_MAIN = "exportconnector.gateway.GatewayMain"  # the deployable jar's Main-Class
BENCH_WRITER = "exportconnector.gateway.BenchWriter"
#: where ``build_native_maps`` puts libaccumulo.so (and build.log); the launcher looks there
NATIVE_DIR = GATEWAY_DIR / "target" / "native"
NATIVE_LIB = NATIVE_DIR / "libaccumulo.so"


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
    build_native_maps()
    return f"{target / 'classes'}{os.pathsep}{cp_file.read_text().strip()}"


def build_native_maps(force: bool = False) -> Path | None:
    """Build Accumulo's native in-memory map library (libaccumulo.so, from the accumulo-native sources Maven
    fetches) into ``NATIVE_DIR`` when it is missing; the embedded tablet servers use it, as production ones
    use native maps. Returns its path, or None when it could not be built: the clusters then run with Java's
    in-memory map and the launcher says so. A failure is not retried until the pom changes (or ``force``);
    ``NATIVE_DIR/build.log`` says why."""
    failed = NATIVE_DIR / ".failed"
    pom_digest = hashlib.sha256((GATEWAY_DIR / "pom.xml").read_bytes()).hexdigest()
    if NATIVE_LIB.is_file() and not force:
        return NATIVE_LIB
    if failed.is_file() and failed.read_text() == pom_digest and not force:
        return None
    NATIVE_DIR.mkdir(parents=True, exist_ok=True)
    log = NATIVE_DIR / "build.log"
    t0 = time.monotonic()
    ok = _make_native(log)
    if ok:
        failed.unlink(missing_ok=True)
        with open(log, "a") as f:
            f.write(f"built {NATIVE_LIB} in {time.monotonic() - t0:.1f} s\n")
        return NATIVE_LIB
    failed.write_text(pom_digest)
    return None


def _make_native(log: Path) -> bool:
    """Unpack the sources (mvn dependency:unpack, cached in ~/.m2) and run their Makefile; output to ``log``."""
    sources = GATEWAY_DIR / "target" / "accumulo-native"
    with open(log, "w") as out:
        steps: list[tuple[list[str], Path]] = []
        if not list(sources.glob("accumulo-native-*/Makefile")):
            if shutil.which("mvn") is None:
                out.write("mvn is not on PATH\n")
                return False
            steps.append((["mvn", "-q", "-B", "dependency:unpack@accumulo-native"], GATEWAY_DIR))
        for cmd, cwd in steps:
            if subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                return False
        makefiles = sorted(sources.glob("accumulo-native-*/Makefile"))
        if not makefiles or shutil.which("make") is None or shutil.which("g++") is None:
            out.write(f"cannot build: sources {'found' if makefiles else 'missing'}, "
                      f"make {'found' if shutil.which('make') else 'missing'}, "
                      f"g++ {'found' if shutil.which('g++') else 'missing'}\n")
            return False
        src = makefiles[-1].parent
        # -g0: no debug info (a third of the compile time); the Makefile builds libaccumulo.so in place
        proc = subprocess.run(["make", "-B", "USERFLAGS=-g0"], cwd=src, stdout=out, stderr=subprocess.STDOUT)
        built = src / "libaccumulo.so"
        if proc.returncode != 0 or not built.is_file():
            return False
        tmp = NATIVE_LIB.with_suffix(".so.tmp")
        shutil.copyfile(built, tmp)
        os.replace(tmp, NATIVE_LIB)  # whole or absent: a launcher never sees half a library
    return True


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
