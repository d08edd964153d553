# Two commands do all the set-up on a fresh machine with only Python:
#   make run    the default design study (studies/default.yaml: cost, waste, blast radius)
#   make test   the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/fabric sweep studies/default.yaml --out results/default --overwrite
	$(BIN)/fabric report results/default

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --nbmake --doctest-modules fabric topologies solvers workloads cli tests notebooks

bench: $(STAMP)
	$(BIN)/python -m pytest -q -m bench -s tests/benchmarks

clean:
	rm -rf $(VENV) .pytest_cache
