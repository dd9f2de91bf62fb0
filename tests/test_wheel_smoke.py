"""The wheel, built once, installs and works on CPython 3.12 and 3.13 (``integration/smoke_wheel.py``: queue
add, a drain in-process, a combine and a drain with Spark ``local[2]``), against the session's clusters. A
version without an interpreter here is skipped, and ``-ra`` lists it with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration import smoke_wheel

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture(params=smoke_wheel.VERSIONS)
def python(request: pytest.FixtureRequest) -> tuple[str, str]:
    found = smoke_wheel.find_python(request.param)
    if found is None:
        pytest.skip(f"no CPython {request.param} here (python{request.param} on PATH or in pyenv): "
                    "the wheel's smoke run on it is skipped")
    return request.param, found


@pytest.fixture(scope="module")
def wheel() -> Path:
    return smoke_wheel.build_wheel()


@pytest.mark.timeout(1800)  # the first run downloads the dependencies into the new virtualenvs
def test_the_wheel_works_on_another_python(python, wheel, accumulo):
    version, interpreter = python
    venv = smoke_wheel.prepare_venv(interpreter, wheel, version)
    seconds = smoke_wheel.smoke(venv, version, accumulo)
    assert set(seconds) == {"check_install", "queue_and_local_drain", "combine_and_spark_drain"}
