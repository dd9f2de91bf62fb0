"""Errors that cross processes by name. The gateway names the errors its IDL has no exception for at the start
of a message (``TimedOutException: ...``); Java spells those names once (``ErrorNames.java``), Python once
(``connector/accumulo/error_names.py``), and the two lists must be equal. The Spark engine recognises our error
classes in a failed task's trace by the classes' own names."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from connector.accumulo import (
    AccumuloError,
    AccumuloSecurityError,
    AccumuloServerError,
    BulkImportNotFoundError,
    TableNotFoundError,
    TimedOutError,
    error_names,
)
from connector.accumulo.errors import translate
from connector.errors import ConnectorError
from connector.jobs.rounds import timed_out_message
from integration.harness import GATEWAY_DIR, GATEWAY_MODULE, ROOT, gateway_jar

JAVA_NAMES = GATEWAY_MODULE / "src" / "main" / "java" / "exportconnector" / "gateway" / "ErrorNames.java"


def test_java_and_python_name_the_same_errors(gateway_classpath):
    out = subprocess.run(["java", "-Xmx64m", "-cp", str(gateway_jar()), "exportconnector.gateway.ErrorNames"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    java = json.loads(out.stdout)
    assert java == error_names.all_names()
    assert set(java) >= {"TIMED_OUT", "SERVER", "SECURITY", "TABLE_NOT_FOUND", "SEPARATOR"}


def test_java_spells_each_name_only_in_error_names():
    assert JAVA_NAMES.is_file()
    names = [v for k, v in error_names.all_names().items() if k != "SEPARATOR"]
    literal = re.compile("\"(?:" + "|".join(map(re.escape, names)) + ")")
    found = [f"{f.relative_to(ROOT)}:{n}: {line.strip()}"
             for f in sorted(GATEWAY_DIR.glob("*/src/**/*.java")) if f != JAVA_NAMES
             for n, line in enumerate(f.read_text().splitlines(), 1) if literal.search(line)]
    assert not found, "a message spelt by hand instead of with ErrorNames:\n" + "\n".join(found)


def test_the_client_matches_the_names_of_error_names():
    matching = [ROOT / "connector" / "accumulo" / f for f in ("errors.py", "writer.py")]
    for f in matching:
        for name in error_names.all_names().values():
            if name != error_names.SEPARATOR:
                assert f'"{name}' not in f.read_text(), f"{f.name} spells {name} by hand"
    from thriftpy2.thrift import TApplicationException

    def sent(name: str) -> BaseException:
        return translate(TApplicationException(TApplicationException.INTERNAL_ERROR,
                                               f"{name}{error_names.SEPARATOR}what happened"))

    expected = {error_names.TIMED_OUT: TimedOutError, error_names.SERVER: AccumuloServerError,
                error_names.SECURITY: AccumuloSecurityError, error_names.TABLE_NOT_FOUND: TableNotFoundError}
    for name, cls in expected.items():
        err = sent(name)
        assert type(err) is cls and str(err) == "what happened", (name, err)
    from connector.accumulo._idl import proxy

    gone = translate(proxy.AccumuloException(f"{error_names.BULK_IMPORT_NOT_FOUND}{error_names.SEPARATOR}no such"))
    assert type(gone) is BulkImportNotFoundError and str(gone) == "no such"
    assert type(translate(proxy.AccumuloException("no bulk import x"))) is AccumuloError  # unnamed: not told apart


def _trace(line: str) -> str:
    """Roughly what Spark shows for a failed Python task: a Java trace around the Python traceback."""
    return ("org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed\n"
            "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
            '  File "/x/connector/jobs/rounds.py", line 9, in work\n'
            f"{line}\n"
            "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)\n")


def test_spark_task_errors_are_recognised_by_the_error_classes_names():
    pytest.importorskip("pyspark")
    from connector.spark.engine import task_message

    assert task_message(RuntimeError(_trace("ValueError: not ours"))) is None
    assert task_message(RuntimeError(_trace("connector.queue.errors.QueueError: queue q is gone"))) == \
        "queue q is gone"
    assert task_message(RuntimeError(_trace(f"connector.accumulo.errors.{TimedOutError.__name__}: no server"))) == \
        timed_out_message("no server")

    class DeadLettersLeft(ConnectorError):  # a class of ours whose name does not end in "Error"
        pass

    assert task_message(RuntimeError(_trace("DeadLettersLeft: 3 left"))) == "3 left"
