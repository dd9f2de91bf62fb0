"""Builds the Java side with Maven when its sources change, and makes java command lines for it.

``integration/gateway`` is a Maven build of two modules: ``gateway`` (the deployable gateway; its shaded jar is
``gateway_jar()``) and ``harness`` (the cluster launcher, the benchmark writer, the Java row-transaction
example). ``build_gateway`` builds both and returns the harness's classpath.

One build per Accumulo line (``LINES``; a Maven profile each, ``-Daccumulo.line=X``): 2.1, the default, builds into
each module's ``target/``, another line into ``target/line-X/``. Every function here takes the line; None means
the ``ACCUMULO_LINE`` environment variable, else 2.1."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from .common import HarnessError

#: the Accumulo lines the Maven build has a profile for; 4.0's is written but its client is not on Maven Central
#: here yet (the build then fails with one line saying so)
LINES = ("2.1", "3.0", "4.0")
DEFAULT_LINE = "2.1"
#: the environment variable that picks the line of the embedded clusters and gateways (``make cluster
#: ACCUMULO=3.0`` sets it)
LINE_ENV = "ACCUMULO_LINE"

ROOT = Path(__file__).resolve().parent.parent.parent
#: the Maven build (parent pom) of the Java side; ``mvn`` runs here
GATEWAY_DIR = ROOT / "integration" / "gateway"
#: its modules: the deployable gateway, and what only the harness runs
GATEWAY_MODULE = GATEWAY_DIR / "gateway"
HARNESS_MODULE = GATEWAY_DIR / "harness"
MODULES = (GATEWAY_MODULE, HARNESS_MODULE)
IDL = ROOT / "connector" / "accumulo" / "proxy.thrift"
#: files of the repository the harness jar holds as resources (its pom names them)
SHARED_RESOURCES = (ROOT / "tests" / "vectors" / "packed.json",)
LAUNCHER = "exportconnector.harness.Launcher"
GATEWAY_MAIN = "exportconnector.gateway.GatewayMain"  # the deployable jar's Main-Class
BENCH_WRITER = "exportconnector.harness.BenchWriter"
ROW_TRANSACTION_EXAMPLE = "exportconnector.examples.RowTransactionExample"
#: where ``build_native_maps`` puts libaccumulo.so (and build.log); the launcher looks there
NATIVE_DIR = HARNESS_MODULE / "target" / "native"
NATIVE_LIB = NATIVE_DIR / "libaccumulo.so"


def accumulo_line(line: str | None = None) -> str:
    """The Accumulo line to build and run: ``line``, else ``$ACCUMULO_LINE``, else 2.1; an unknown one is refused."""
    chosen = (line or os.environ.get(LINE_ENV, "") or DEFAULT_LINE).strip()
    if chosen not in LINES:
        raise HarnessError(f"unknown Accumulo line {chosen!r} ({LINE_ENV} or line=): one of {', '.join(LINES)}")
    return chosen


def target_dir(module: Path, line: str | None = None) -> Path:
    """A module's Maven build folder for ``line``: ``target/`` for 2.1, ``target/line-X/`` for another."""
    chosen = accumulo_line(line)
    return module / "target" if chosen == DEFAULT_LINE else module / "target" / f"line-{chosen}"


def pom_property(name: str, line: str | None = None) -> str:
    """A property of the parent pom for ``line`` (its profile's value, else the default):
    ``accumulo.client.version`` (the deployable gateway's Accumulo client), ``accumulo.server.version`` (the
    embedded clusters and everything on the harness's classpath), ..."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ET.parse(GATEWAY_DIR / "pom.xml").getroot()
    for profile in root.findall("m:profiles/m:profile", ns):
        if profile.findtext("m:id", namespaces=ns) == f"accumulo-{accumulo_line(line)}":
            value = profile.findtext(f"m:properties/m:{name}", namespaces=ns)
            if value is not None:
                return value.strip()
    value = root.findtext(f"m:properties/m:{name}", namespaces=ns)
    if value is None:
        raise HarnessError(f"{GATEWAY_DIR / 'pom.xml'} has no property {name}")
    return value.strip()


def _sources_hash() -> str:
    """What decides a rebuild: every pom, every file under the modules' ``src``, the IDL and the shared
    resources."""
    h = hashlib.sha256()
    poms = [GATEWAY_DIR / "pom.xml", *(m / "pom.xml" for m in MODULES)]
    files = [*poms, IDL, *SHARED_RESOURCES, *sorted(f for m in MODULES for f in (m / "src").rglob("*"))]
    for f in files:
        if f.is_file():
            h.update(str(f.relative_to(ROOT)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def build_gateway(force: bool = False, line: str | None = None) -> str:
    """Build both modules for ``line`` when a pom, a source or the IDL changed; return the harness's classpath
    (its classes, the gateway module's jar and every dependency, the minicluster too: all of the line's
    embedded server release, ``accumulo.server.version``), on which the launcher, the benchmark writer and the
    Java example run. The deployable jar is ``gateway_jar(line)``."""
    chosen = accumulo_line(line)
    target = target_dir(HARNESS_MODULE, chosen)
    stamp = target / ".build-hash"
    cp_file = target / "classpath.txt"
    digest = _sources_hash()
    jar_missing = not list(target_dir(GATEWAY_MODULE, chosen).glob(_jar_pattern(chosen)))
    if force or not stamp.exists() or stamp.read_text() != digest or not cp_file.exists() or jar_missing:
        if shutil.which("mvn") is None:
            raise HarnessError("Maven (mvn) is not on PATH; install it (make deps does)")
        if shutil.which("thrift") is None:
            raise HarnessError("the thrift compiler is not on PATH; `apt-get install thrift-compiler` (make deps)")
        _require_client(chosen)
        # one run: the harness's classpath then names the gateway module's jar, packaged moments before
        args = ["package", "-DskipTests", "dependency:build-classpath",
                f"-Dmdep.outputFile={cp_file.relative_to(HARNESS_MODULE)}"]
        if chosen != DEFAULT_LINE:
            args.insert(0, f"-Daccumulo.line={chosen}")
        proc = subprocess.run(["mvn", "-q", "-B", *args], cwd=GATEWAY_DIR, capture_output=True, text=True)
        if proc.returncode != 0:
            output = proc.stdout + proc.stderr
            tail = "\n".join(output.splitlines()[-40:])
            raise HarnessError(f"gateway build failed (mvn {' '.join(args)}):\n{tail}")
        stamp.write_text(digest)
    build_native_maps(line=chosen)
    return f"{target / 'classes'}{os.pathsep}{cp_file.read_text().strip()}"


_unserved: dict[str, str] = {}  # line -> the one-line error, once per process


def _require_client(line: str) -> None:
    """Resolve the line's ``accumulo-core`` alone first (one small Maven run when it is not in the local
    repository yet), so a line the repository does not serve fails in one line, quickly, before a build."""
    if line in _unserved:
        raise HarnessError(_unserved[line])
    version = pom_property("accumulo.client.version", line)
    local = Path.home() / ".m2" / "repository" / "org" / "apache" / "accumulo" / "accumulo-core" / version
    if (local / f"accumulo-core-{version}.jar").is_file():
        return
    artifact = f"org.apache.accumulo:accumulo-core:{version}"
    proc = subprocess.run(["mvn", "-q", "-B", "dependency:get", f"-Dartifact={artifact}", "-Dtransitive=false"],
                          cwd=GATEWAY_DIR, capture_output=True, text=True)
    if proc.returncode != 0:
        _unserved[line] = f"cannot build the Accumulo {line} gateway: the Maven repository does not serve {artifact}"
        raise HarnessError(_unserved[line])


def _jar_pattern(line: str) -> str:
    return f"accumulo-gateway-{line}-*-all.jar"


def native_dir(line: str | None = None) -> Path:
    """Where ``build_native_maps`` puts the line's libaccumulo.so (and build.log); the launcher looks there."""
    return target_dir(HARNESS_MODULE, line) / "native"


def build_native_maps(force: bool = False, line: str | None = None) -> Path | None:
    """Build Accumulo's native in-memory map library (libaccumulo.so, from the accumulo-native sources Maven
    fetches) into ``NATIVE_DIR`` when it is missing; the embedded tablet servers use it, as production ones
    use native maps. Returns its path, or None when it could not be built: the clusters then run with Java's
    in-memory map and the launcher says so. A failure is not retried until a pom changes (or ``force``);
    ``native_dir(line)/build.log`` says why."""
    chosen = accumulo_line(line)
    lib_dir = native_dir(chosen)
    lib = lib_dir / NATIVE_LIB.name
    failed = lib_dir / ".failed"
    poms = hashlib.sha256()
    for pom in (GATEWAY_DIR / "pom.xml", HARNESS_MODULE / "pom.xml"):  # the version is the parent's
        if pom.is_file():
            poms.update(pom.read_bytes())
    pom_digest = poms.hexdigest()
    if lib.is_file() and not force:
        return lib
    if failed.is_file() and failed.read_text() == pom_digest and not force:
        return None
    lib_dir.mkdir(parents=True, exist_ok=True)
    log = lib_dir / "build.log"
    t0 = time.monotonic()
    ok = _make_native(log, chosen)
    if ok:
        failed.unlink(missing_ok=True)
        with open(log, "a") as f:
            f.write(f"built {lib} in {time.monotonic() - t0:.1f} s\n")
        return lib
    failed.write_text(pom_digest)
    return None


def _make_native(log: Path, line: str) -> bool:
    """Unpack the sources (mvn dependency:unpack, cached in ~/.m2) and run their Makefile; output to ``log``."""
    sources = target_dir(HARNESS_MODULE, line) / "accumulo-native"
    lib = native_dir(line) / NATIVE_LIB.name
    with open(log, "w") as out:
        steps: list[tuple[list[str], Path]] = []
        if not list(sources.glob("accumulo-native-*/Makefile")):
            if shutil.which("mvn") is None:
                out.write("mvn is not on PATH\n")
                return False
            steps.append((["mvn", "-q", "-B", f"-Daccumulo.line={line}", "-pl", HARNESS_MODULE.name,
                           "dependency:unpack@accumulo-native"], GATEWAY_DIR))
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
        tmp = lib.with_suffix(".so.tmp")
        shutil.copyfile(built, tmp)
        os.replace(tmp, lib)  # whole or absent: a launcher never sees half a library
    return True


def gateway_jar(line: str | None = None) -> Path:
    """The deployable gateway jar of ``line`` (``java -jar <jar> --config gateway.properties``), built by
    ``build_gateway(line=...)``: the gateway module's shaded jar, ``accumulo-gateway-<line>-<version>-all.jar``,
    with the line's Accumulo client (2.1: 2.1.6; 3.0: 3.0.0) and nothing of the harness."""
    chosen = accumulo_line(line)
    jars = sorted(target_dir(GATEWAY_MODULE, chosen).glob(_jar_pattern(chosen)))
    if not jars:
        raise HarnessError(f"the Accumulo {chosen} gateway jar is missing: run build_gateway(line={chosen!r}) "
                           f"(make gateway-jar ACCUMULO={chosen})")
    return jars[-1]


def java_command(classpath: str, main: str, *args: str, heap: str = "1g", tmpdir: Path | None = None) -> list[str]:
    """``tmpdir``: the JVM's java.io.tmpdir, so what it leaves there (Accumulo's VFS cache) goes with it."""
    options = [f"-Djava.io.tmpdir={tmpdir}"] if tmpdir else []
    return ["java", f"-Xmx{heap}", "-XX:+UseSerialGC", *options, "-cp", classpath, main, *args]
