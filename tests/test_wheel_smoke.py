"""The wheel, built once, installs and works on CPython 3.12 and 3.13 (``integration/smoke_wheel.py``: queue
add, a drain and a combine in-process, a drain with Spark ``local[2]``), against the session's clusters; the
3.12 virtualenv runs the oldest supported PySpark (4.0.x), the 3.13 one a 4.2, and both also drive the streams,
the streaming sink and the read source there (issue 30 item 3); on 4.2 a Spark Connect server without the
connector refuses the streaming drain in one line (issue 39 item 6). A version without an interpreter here is
skipped, and ``-ra`` lists it with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration import smoke_wheel

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture(scope="module")
def venvs() -> dict[str, Path]:
    """The wheel, built once, installed into a virtualenv of every version found here (prepared at once)."""
    found = {v: p for v in smoke_wheel.VERSIONS if (p := smoke_wheel.find_python(v)) is not None}
    return smoke_wheel.prepare_venvs(found, smoke_wheel.build_wheel()) if found else {}


@pytest.mark.timeout(1800)  # the first run downloads the dependencies into the new virtualenvs
@pytest.mark.parametrize("version", smoke_wheel.VERSIONS)
def test_the_wheel_works_on_another_python(version, venvs, accumulo):
    if version not in venvs:
        pytest.skip(f"no CPython {version} here (python{version} on PATH or in pyenv): "
                    "the wheel's smoke run on it is skipped")
    seconds = smoke_wheel.smoke(venvs[version], version, accumulo)
    pin = smoke_wheel.PYSPARK.get(version)
    assert set(seconds) == {"check_install", "queue_and_local_drain", "combine_and_spark_drain",
                            *(["spark_fallbacks"] if pin else []),
                            *(["connect_without_package"] if pin in smoke_wheel.CONNECT_PYSPARK else [])}
    print(f"smoke on Python {version}, PySpark {pin or 'newest'}: {seconds}")
