"""The drain on a real Spark standalone cluster (issue 10): a master and a worker in JVMs of their own,
executors with their own Python workers, the connector shipped to them as a packed environment with
``spark-submit --archives`` (docs/spark.md's recipe), and a Python worker killed mid-task."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from integration.spark_cluster import executor_environment, spark_home, standalone_spark

from .conftest import ROOT, drain_args

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.slow]  # 84 s in a fresh `make test`


def test_drain_with_spark_submit_on_a_standalone_cluster_survives_a_killed_python_worker(scenario, cli_env,
                                                                                         tmp_path):
    archive = executor_environment()  # built once per version of the sources, then cached
    scenario.produce(1500, seed=101)
    before = scenario.depth()
    marker = tmp_path / "killed-worker"
    args = drain_args(scenario)
    args[args.index("--translator") + 1] = "worker_killer:kill_once"
    env = {k: v for k, v in cli_env.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_MASTER")}
    env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1")
    with standalone_spark() as spark_cluster:
        command = [str(spark_home() / "bin" / "spark-submit"), "--master", spark_cluster.master_url,
                   "--archives", f"{archive}#env", "--py-files", str(ROOT / "tests" / "worker_killer.py"),
                   "--conf", "spark.pyspark.python=./env/bin/python",
                   "--conf", f"spark.pyspark.driver.python={sys.executable}",
                   "--conf", "spark.executor.memory=1g", "--conf", "spark.task.maxFailures=4",
                   "--conf", f"spark.executorEnv.WORKER_KILLER_MARKER={marker}",
                   str(ROOT / "connector" / "__main__.py"), *args, "--buffer-bytes", "20000"]
        done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
        # the executors ran the connector from the shipped archive, unpacked in the worker's folders
        shipped = list(spark_cluster.work_dir.glob("app-*/*/env/lib/python*/site-packages/connector/_native*.so"))
        assert shipped, sorted(str(p) for p in spark_cluster.work_dir.rglob("*"))[:50]
        apps = spark_cluster.status()["completedapps"] + spark_cluster.status()["activeapps"]
        assert apps, "the drain did not run as an application of the standalone master"
    # one Python worker was killed in the middle of its task (after some of its batches were exported and
    # deleted); Spark ran the task again, which drained what was left
    assert marker.exists() and int(marker.read_text()) != os.getpid()
    assert before > 0 and scenario.depth() == 0
    scenario.verify()
