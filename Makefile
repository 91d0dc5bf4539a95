# Two entry points for a fresh machine: `make run` and `make test`.
# Both create ./.venv on first use and install the project with its dev extras into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run stop test test-grpcio lint bench docs-cli protos clean

# The tests keep compiled bytecode under .venv/pycache (see `test`), where Python looks
# instead of beside each module: compile the installed packages there once, on install.
BYTECODE := env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(CURDIR)/$(VENV)/pycache

$(STAMP): pyproject.toml engine/protocol/_speedups.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BYTECODE) $(BIN)/python -m compileall -q -j 0 $(VENV)/lib > /dev/null
	touch $(STAMP)

# On a terminal, `make run` then opens the dashboard; quitting it leaves the cluster running.
run: $(STAMP)
	$(BIN)/mqadmin dev up
	@if [ -t 0 ] && [ -t 1 ]; then $(BIN)/mqadmin dashboard --context dev; \
	else echo "Open the dashboard on a terminal with: $(BIN)/mqadmin dashboard --context dev"; fi

stop: $(STAMP)
	$(BIN)/mqadmin dev down

lint: $(STAMP)
	$(BIN)/ruff check engine mqadmin tests benchmarks
	$(BIN)/mypy engine mqadmin

# The tests run on four pytest-xdist workers, two per core of a 2-core machine: most tests wait
# on servers, processes and protocol timers (four workers: 129-157 s, the cores 77% busy; see
# docs/design.md); the Spark tests share one worker and its session (tests/scheduling.py).
# `make test WORKERS=0` runs them all in this process, one after the other.
# The Node.js client tests install their npm client on first use (tests/proxy/nodejs.py) and
# skip without node/npm or the npm registry (-ra, in pyproject.toml, prints why).
# Compiled bytecode is kept (under .venv, not beside the sources) even where the environment
# says not to write it (PYTHONDONTWRITEBYTECODE): the tests start hundreds of brokers, proxies
# and commands as processes, and each would compile the engine again (0.7 s of CPU for a
# broker's imports instead of 0.2 s).  The sources are compiled before pytest starts: on a
# fresh clone the four workers and the processes they start would otherwise each compile the
# same modules at once (80 s of CPU more, 173 s instead of 139 s).  So are the methods
# `dataclasses` writes for the servers' classes (kept beside the bytecode by
# engine.common.dataclass_code: 60 ms less of each broker's start).
# The proxy's tests run against its default gRPC front (ours, engine/proxy/h2); those of the
# front itself (TLS, protocol errors, workers, the processes, the service's calls) run again
# against grpcio's.  `make test-grpcio` runs the whole proxy suite against grpcio's front.
WORKERS ?= 4
SERVERS := engine.broker.main, engine.proxy.main, engine.proxy.worker, engine.namesrv.main, \
	engine.controller.main, mqadmin.dev.traffic
PYTEST := $(BYTECODE) $(BIN)/pytest -q -n $(WORKERS)
FRONT_TESTS := tests/proxy/test_tls.py tests/proxy/test_h2_protocol_errors.py \
	tests/proxy/test_workers.py tests/proxy/test_workers_state.py tests/proxy/test_main.py \
	tests/proxy/test_service.py
test: lint
	$(BYTECODE) $(BIN)/python -m compileall -q -j 0 engine mqadmin tests > /dev/null
	$(BYTECODE) $(BIN)/python -c 'import $(SERVERS)'
	$(PYTEST) --dist loadgroup
	PROXY_FRONT=grpcio $(PYTEST) $(FRONT_TESTS)

test-grpcio: $(STAMP)
	PROXY_FRONT=grpcio $(PYTEST) tests/proxy

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# engine/proxy/v2 from the vendored .proto files (apache/rocketmq-apis v2.0.4) with grpcio-tools;
# the generated code is committed, so installs need no codegen.
protos: $(STAMP)
	$(BIN)/python engine/proxy/proto/generate.py

docs-cli: $(STAMP)
	$(BIN)/python -m mqadmin.docgen > docs/cli-reference.md

clean:
	rm -rf $(VENV)
