# Two entry points for a fresh machine: `make run` and `make test`.
# Both create ./.venv on first use and install the project with its dev extras into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/mqnamesrv

lint: $(STAMP)
	$(BIN)/ruff check engine mqadmin tests benchmarks
	$(BIN)/mypy engine

test: lint
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV)
