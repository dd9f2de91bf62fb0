"""Kerberos end to end: two Kerberized MiniAccumuloClusters (A and B, one KDC: Apache Kerby, started by the
launcher with ``--kerberos``) with SASL RPC, the Kerberos authenticator, authorizor and permission handler, and
root = the Kerberos principal ``root@EXAMPLE.COM``. The gateways log in from root's keytab: the launcher's
in-process ones (A) and the deployable jar on the Accumulo 2.1.6 client (B, and the start-up failures).

Row transactions commit into A through ``connector.transactions``; Spark (``local[2]``) drains the queue into B.
Spark's executors hold no Kerberos ticket and no krb5.conf: they reach Accumulo only through the gateways,
which hold the identity. A gateway whose first ticket lives 80 s renews its login and serves new connections
after that ticket ended. A gateway given a wrong principal, a stale, missing or foreign keytab, a wrong service
primary, a missing krb5.conf or an unreachable KDC, or whose clock is 15 minutes ahead (faketime), fails at
start-up with one line naming the cause."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest

from connector.accumulo import Mutation, Range
from connector.queue import DrainSettings, ExportQueue, QueueConfig, queue_status
from connector.spark import DrainJob, run_batch
from connector.spark.options import GatewayOptions
from connector.transactions import RowTransactions, Transaction
from examples.inverted_count_index import actual_index, count_update
from integration.harness import Cluster, Clusters, StandaloneGateway, clusters, gateway_jar, write_properties

from .conftest import unique_table

# its own pair of Kerberized clusters (no `accumulo` fixture), so the mark is set here; 185-220 s in all
pytestmark = [pytest.mark.cluster, pytest.mark.slow]

#: the lifetime of the renewing gateway's tickets: Hadoop re-logs in at 80% of it, and not within 60 s of the
#: last login (hadoop.kerberos.min.seconds.before.relogin), so it must be above 75 s
SHORT_TICKET_S = 80


@pytest.fixture(scope="module")
def kerberized() -> Iterator[Clusters]:
    with clusters(("ka", "kb"), kerberos=True) as running:
        yield running


@pytest.fixture(scope="module")
def renewing_gateway(kerberized: Clusters, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneGateway]:
    """The jar on A with tickets of SHORT_TICKET_S (its own krb5.conf asks the KDC for no longer) and a renewal
    check every second. Started by the first test, checked by the last: the tests between cover the wait."""
    a = kerberized["ka"]
    assert a.kerberos
    krb5 = Path(a.kerberos["krb5_conf"]).read_text()
    short = tmp_path_factory.mktemp("krb5") / "krb5.conf"
    short.write_text(krb5.replace("[libdefaults]\n", f"[libdefaults]\n  ticket_lifetime = {SHORT_TICKET_S}s\n", 1))
    cluster = Cluster(**{**a.__dict__, "kerberos": {**a.kerberos, "krb5_conf": str(short)}})
    gw = StandaloneGateway(cluster, extra_properties={"gateway.kerberos.renew.seconds": "1"})
    gw.start()
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def skewed_gateway(kerberized: Clusters, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Future | None]:
    """The jar on A with its clock 15 minutes ahead (faketime), run in the background from the first test on: a
    JVM under libfaketime starts about ten times slower, so its minute overlaps the other tests. None without
    faketime."""
    if shutil.which("faketime") is None:
        yield None
        return
    env = dict(os.environ, FAKETIME_DONT_FAKE_MONOTONIC="1")  # the JVM's timers keep real time
    folder = tmp_path_factory.mktemp("skewed")
    with ThreadPoolExecutor(1) as pool:
        yield pool.submit(run_jar, kerberized["ka"], folder, {}, prefix=["faketime", "-f", "+15m"], env=env)


def bump(queue: QueueConfig):  # noqa: ANN201 - a transaction function
    def fn(tx: Transaction) -> None:
        word = tx.row.decode()
        old = int(tx.get(b"c", b"n", default=b"0"))
        tx.put(b"c", b"n", str(old + 1).encode())
        tx.export(queue, word, count_update(word, old or None, old + 1))
    return fn


def test_a_row_transaction_and_a_drain_through_kerberized_a_and_b(kerberized, renewing_gateway, skewed_gateway,
                                                                  spark):
    t0 = time.monotonic()
    a, b = kerberized["ka"], kerberized["kb"]
    for c in (a, b):  # Kerberized for real: SASL on every RPC, Kerberos users, root is a principal
        site = (Path(c.dir) / "conf" / "accumulo.properties").read_text()
        assert "instance.rpc.sasl.enabled=true" in site
        assert "handler.KerberosAuthenticator" in site and "handler.KerberosPermissionHandler" in site
        assert c.user == "root@EXAMPLE.COM" and c.client_properties()["auth.type"] == "kerberos"
    log = kerberized.log_file.read_text()
    assert re.search(r"gateway ka authenticated to Accumulo by Kerberos as root@EXAMPLE\.COM \(keytab \S+root"
                     r"\.keytab, ticket valid until \d{4}-", log), log[-3000:]

    # B through the deployable jar (Accumulo 2.1.6 client), logged in from root's keytab
    gw_b = StandaloneGateway(b)
    gw_b.start()
    try:
        assert gw_b.ready["kerberos_principal"] == "root@EXAMPLE.COM"
        gw_log = gw_b.log_file.read_text()
        started = [line for line in gw_log.splitlines() if "authenticated to Accumulo by Kerberos" in line]
        assert len(started) == 1 and "as root@EXAMPLE.COM (keytab " in started[0], gw_log

        with a.connect() as conn_a, gw_b.connect() as conn_b:
            queue = QueueConfig(table=unique_table("kq"), qid="k", num_buckets=4)
            ExportQueue(conn_a, queue).init()
            txs = RowTransactions(conn_a, unique_table("kcounts"))
            txs.init()
            counts = {"alpha": 3, "beta": 1, "gamma": 2}
            for word, n in counts.items():
                for _ in range(n):
                    txs.run(word, bump(queue))
            txs.flush()  # the relayer's copies into the queue
            assert queue_status(conn_a, queue).entries == sum(counts.values())

            index = unique_table("kindex")
            dest = GatewayOptions("127.0.0.1", gw_b.port, secret_file=b.secret_file)
            job = DrainJob(source=a.gateway_options(), dest=dest, queue=queue, dest_table=index,
                           settings=DrainSettings(create_dest_table=True))
            report = run_batch(spark, job)  # Spark's tasks talk to the gateways: no ticket on that side
            assert report.exported == sum(counts.values()), report
            assert set(actual_index(conn_b, index)) == {(f"{n:08d}".encode(), w.encode()) for w, n in counts.items()}
            assert queue_status(conn_a, queue).entries == 0
    finally:
        gw_b.stop()
    print(f"kerberos drain test: {time.monotonic() - t0:.1f} s after the clusters were up")


def run_jar(cluster: Cluster, tmp_path: Path, overrides: dict[str, str],
            prefix: Sequence[str] = (), env: dict[str, str] | None = None,
            jvm_args: Sequence[str] | None = None) -> subprocess.CompletedProcess[str]:
    client = tmp_path / "accumulo-client.properties"
    write_properties(client, {**cluster.client_properties(), **overrides}, "test")
    config = tmp_path / "gateway.properties"
    write_properties(config, {"accumulo.client.properties": str(client), "gateway.secret.file": cluster.secret_file,
                              "gateway.port": "0"}, "test")
    jvm = cluster.jvm_args() if jvm_args is None else jvm_args
    return subprocess.run([*prefix, "java", "-Xmx256m", "-XX:+UseSerialGC", *jvm, "-jar",
                           str(gateway_jar()), "--config", str(config)], capture_output=True, text=True, timeout=180,
                          env=env)


def test_a_wrong_principal_or_a_bad_keytab_fails_at_start_up_in_one_line(kerberized, tmp_path):
    a = kerberized["ka"]
    assert a.kerberos
    keytabs = a.kerberos["keytabs"]
    not_a_keytab = tmp_path / "not.keytab"
    not_a_keytab.write_text("this is not a keytab\n")
    cases = [
        # (client property changes, exit status, what the one line says)
        ({"auth.principal": "nobody@EXAMPLE.COM"}, 1,
         r"Kerberos login as nobody@EXAMPLE\.COM failed: keytab \S+root\.keytab holds no key for nobody@EXAMPLE\.COM "
         r"\(wrong auth\.principal"),
        ({"auth.principal": "stale@EXAMPLE.COM", "auth.token": keytabs["stale"]}, 1,
         r"Kerberos login as stale@EXAMPLE\.COM from keytab \S+stale\.keytab failed: the keytab's key does not match "
         r"the KDC's \(a stale keytab"),
        ({"auth.token": str(tmp_path / "missing.keytab")}, 1,
         r"Kerberos login as root@EXAMPLE\.COM failed: keytab \S+missing\.keytab does not exist"),
        ({"auth.token": str(not_a_keytab)}, 1, r"keytab \S+not\.keytab holds no key for root@EXAMPLE\.COM"),
        ({"sasl.kerberos.server.primary": "accumul0"}, 1,
         r"logged in to Kerberos as root@EXAMPLE\.COM, but got no service ticket for Accumulo's tablet server "
         r"accumul0/localhost@EXAMPLE\.COM .*the KDC does not know the Accumulo service principal"),
        ({"sasl.enabled": "false"}, 2, r"auth\.type=kerberos needs sasl\.enabled=true"),
    ]
    # the JVM's krb5.conf: missing, or naming a KDC nobody listens at (port 9, discard)
    closed = tmp_path / "closed-krb5.conf"
    closed.write_text(re.sub(r"kdc = 127\.0\.0\.1:\d+", "kdc = 127.0.0.1:9", Path(a.kerberos["krb5_conf"]).read_text()))
    krb5_cases = [
        ([f"-Djava.security.krb5.conf={tmp_path / 'missing-krb5.conf'}"],
         r"failed: no Kerberos configuration for the realm: krb5\.conf is missing"),
        ([f"-Djava.security.krb5.conf={closed}"],
         r"failed: cannot reach the KDC \(check the kdc entries of krb5\.conf"),
    ]
    secret = Path(keytabs["root"]).read_bytes()
    runs = [(overrides, None, status, line) for overrides, status, line in cases]
    runs += [({}, jvm_args, 1, line) for jvm_args, line in krb5_cases]
    for overrides, jvm_args, status, line in runs:
        t0 = time.monotonic()
        proc = run_jar(a, tmp_path, overrides, jvm_args=jvm_args)
        lines = [x for x in proc.stderr.splitlines() if x.strip()]
        assert proc.returncode == status and len(lines) == 1, (overrides, proc.returncode, proc.stderr[-3000:])
        assert lines[0].startswith("gateway: ") and re.search(line, lines[0]), (overrides, lines[0])
        assert "READY" not in proc.stdout
        assert secret.decode("latin-1") not in proc.stderr.encode().decode("latin-1")
        assert time.monotonic() - t0 < 60, f"{overrides}: took {time.monotonic() - t0:.0f} s to fail"


@pytest.mark.skipif(shutil.which("faketime") is None, reason="needs faketime (Debian: apt-get install faketime)")
def test_clock_skew_fails_at_start_up_in_one_line(skewed_gateway):
    """The gateway's JVM 15 minutes ahead of the KDC (libfaketime; the KDC allows 5 minutes): KDC error 37."""
    assert skewed_gateway is not None
    proc = skewed_gateway.result()
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr[-3000:]
    # the KDC refuses the skewed request: the login's own (MIT's KDC, with pre-authentication) or, with the
    # test KDC (no pre-authentication), the request for the tablet servers' service ticket right after it
    assert re.search(r"^gateway: start-up failed: (Kerberos login as|logged in to Kerberos as) root@EXAMPLE\.COM\b.*: "
                     r"clock skew too great between this host and the KDC \(sync the clocks", lines[0]), lines[0]


def test_the_gateway_renews_its_login_and_serves_after_its_first_ticket_ended(renewing_gateway):
    log = renewing_gateway.log_file
    first = re.search(r"authenticated to Accumulo by Kerberos as root@EXAMPLE\.COM \(keytab \S+, ticket valid until "
                      r"(\S+)\)", log.read_text())
    assert first, log.read_text()[-3000:]
    end = datetime.fromisoformat(first.group(1).replace("Z", "+00:00")).timestamp()
    assert end - time.time() < SHORT_TICKET_S + 5, "the ticket is not short-lived: the test would prove nothing"
    time.sleep(max(0.0, end - time.time() + 5))  # the first ticket has ended; idle pooled connections closed
    renewed = re.findall(r"renewed the Kerberos login of root@EXAMPLE\.COM: ticket valid until (\S+)", log.read_text())
    assert renewed, log.read_text()[-3000:]
    assert datetime.fromisoformat(renewed[-1].replace("Z", "+00:00")).timestamp() > time.time()
    with renewing_gateway.connect() as conn:  # new SASL connections need service tickets from the new login
        table = unique_table("krenew")
        conn.create_table(table)
        conn.write(table, [Mutation(b"r").put(b"f", b"q", b"v")])
        assert [c.value for c in conn.scan(table, Range())] == [b"v"]
    assert "Exception" not in log.read_text()
