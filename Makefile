# Everything a fresh clone needs: `make test` and `make demo` install, build and start what they use.
PY        ?= python3
VENV      := .venv
VPY       := $(VENV)/bin/python
STAMP     := $(VENV)/.installed
PYTEST_ARGS ?=
# the Rust core: a change to it re-runs the editable install, which rebuilds the extension (release)
CRATE     := connector/_native
NATIVE_SRC := $(wildcard $(CRATE)/Cargo.toml $(CRATE)/Cargo.lock $(CRATE)/src/*.rs $(CRATE)/src/*/*.rs)
CARGO_ENV := PYO3_PYTHON=$(abspath $(VPY))

.PHONY: deps build gateway-jar lint test smoke-wheel docs demo demo-wordcount cluster bench soak chaos sim clean

deps: $(STAMP) /usr/bin/thrift /usr/bin/faketime /usr/bin/promtool

/usr/bin/thrift:
	@command -v thrift >/dev/null 2>&1 || { \
	  echo "installing thrift-compiler (Debian) ..."; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq thrift-compiler >/dev/null; }
	@command -v java >/dev/null 2>&1 || { echo "Java 17 is required (java not on PATH)"; exit 1; }
	@command -v mvn >/dev/null 2>&1 || { echo "Maven is required (mvn not on PATH)"; exit 1; }

# tests/test_kerberos.py runs a gateway with its clock 15 minutes ahead (skipped without it)
/usr/bin/faketime:
	@command -v faketime >/dev/null 2>&1 || { \
	  echo "installing faketime (Debian) ..."; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -qq faketime >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq faketime >/dev/null; } || \
	  echo "faketime not installed: the clock-skew test will be skipped"; }

# tests/test_monitoring.py checks the alert rules and the dashboard's queries with promtool: Debian's, at a fixed
# version (its package holds the Prometheus server too, which is installed but never started here)
PROMTOOL_DEB := 2.42.0+ds-5+deb12u1
/usr/bin/promtool:
	@command -v promtool >/dev/null 2>&1 || { \
	  echo "installing promtool (Debian prometheus $(PROMTOOL_DEB)) ..."; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -qq --no-install-recommends prometheus=$(PROMTOOL_DEB) >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends \
	      prometheus=$(PROMTOOL_DEB) >/dev/null; }; }

$(STAMP): pyproject.toml $(NATIVE_SRC)
	@command -v cargo >/dev/null 2>&1 || { echo "cargo (Rust) is required to build connector._native"; exit 1; }
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

build: deps
	$(VPY) -c "from integration.harness import build_gateway; build_gateway()"

# ACCUMULO=3.0: the Accumulo line of the gateway jar, the embedded clusters (make cluster, make demo); default 2.1.
# Passed to the harness as ACCUMULO_LINE (integration/harness/build.py).
ACCUMULO ?=
LINE_ENV := $(if $(ACCUMULO),ACCUMULO_LINE=$(ACCUMULO))

# the deployable gateway: java -jar <printed path> --config gateway.properties (integration/gateway/README.md)
gateway-jar: deps
	@$(LINE_ENV) $(VPY) -c "from integration.harness import build_gateway, gateway_jar; build_gateway(); print(gateway_jar())"

lint: deps
	$(VPY) -m ruff check connector integration tests examples
	$(VPY) -m mypy
	cargo fmt --manifest-path $(CRATE)/Cargo.toml --check
	$(CARGO_ENV) cargo clippy --manifest-path $(CRATE)/Cargo.toml --release -q -- -D warnings

# everything, the wheel's smoke runs on Python 3.12 and 3.13 included (tests/test_wheel_smoke.py: skipped, and
# listed as skipped, where those interpreters are missing). Quicker: PYTEST_ARGS='-m "not slow"', or
# '-m "not cluster"' (no JVM at all: no Accumulo, no gateway, no Spark). Two pytest-xdist workers, a whole file
# each (--dist loadfile: a file's tests share its fixtures), each with its own pair of clusters: the suite
# waits on JVMs and processes most of the time, so two workers take ~20 min where one took ~33 on two cores.
# TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
test: build lint
	$(VPY) -m pytest -q -ra --durations=15 -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# the wheel built once (pip wheel --no-deps .), installed into fresh venvs of CPython 3.12 and 3.13 (.smoke/,
# kept between runs), driven against embedded clusters of its own
smoke-wheel: build
	$(VPY) -m integration.smoke_wheel

# the documentation site into docs/site/ (not committed): the guides (README.md, docs/*.md) as HTML, with an index,
# beside the API reference rendered from the docstrings (docs/site/api/); fails on any warning (integration/docs.py)
docs: deps
	$(VPY) -m integration.docs

demo: build
	$(LINE_ENV) $(VPY) -m examples.demo

demo-wordcount: build
	$(VPY) -m examples.word_count

# KERBEROS=1: a KDC and Kerberized clusters, the gateways logged in from a keytab
cluster: build
	$(LINE_ENV) $(VPY) -m integration.harness $(if $(KERBEROS),--kerberos)

# every benchmark but the soak (30 minutes: make soak)
bench: build
	@for b in integration/bench/bench_*.py; do case $$b in *bench_soak.py) continue;; esac; \
	  echo "== $$b"; $(VPY) $$b || exit 1; done

soak: build
	$(VPY) integration/bench/bench_soak.py

# the randomized fault schedule (integration/chaos): MINUTES of faults (quiet points add their own time) drawn
# from SEED (default: a random one, printed first); exit 0 only on PASS. `make chaos MINUTES=60 SEED=n`
# reproduces a run's schedule. tests/test_chaos.py runs a seeded 3-minute one.
MINUTES ?= 30
SEED    ?=
chaos: build
	$(VPY) -m integration.chaos --minutes $(MINUTES) $(if $(SEED),--seed $(SEED))

# the deterministic simulation (integration/sim): random schedules of the real connector code against simulated
# clusters, checked by its oracle; a failure prints its seed and its schedule shrunk (docs/development.md)
sim: build
	$(VPY) -m integration.sim --minutes $(MINUTES) $(if $(SEED),--seed $(SEED))

clean:
	rm -rf $(VENV) integration/gateway/target integration/gateway/*/target $(CRATE)/target connector/_native*.so .pytest_cache .mypy_cache .ruff_cache .hypothesis \
	  .smoke docs/site
