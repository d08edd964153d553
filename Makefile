# Two commands do all the set-up on a fresh machine with only Python:
#   make run    the default design study (studies/default.yaml: cost, waste, blast radius, cross-ToR, MFU)
#   make test   the whole test suite
# Both install exact versions from the lock (requirements/*.lock), so every fresh machine gets the
# environment the suite passed with. `make lock` refreshes the lock; `make test-latest` runs the suite on
# the newest releases that pyproject.toml's ranges admit (in .venv-latest, never used by CI).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
UV_VERSION := 0.13.9
# pip (not uv) installs, so that nothing beyond Python is needed on a fresh machine; the lock has hashes
PIP_INSTALL = $(BIN)/pip install --quiet --disable-pip-version-check --require-hashes --no-deps
# An editable install leaves the project's own modules uncompiled (pip compiles only what it copies), and where
# PYTHONDONTWRITEBYTECODE is set Python never caches them: every `fabric` call would compile ~40 modules first
# (0.09 s of a 0.3 s `fabric --help`). Compiling once here is what a wheel install does; a stale file is
# recompiled on import as usual.
COMPILE = $(BIN)/python -m compileall -q cli fabric topologies workloads solvers >/dev/null

.PHONY: run test bench lock test-latest clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# running needs the runtime lock only; the tests add their extras (pytest, dask, selenium, nbmake)
$(VENV)/.installed-run: requirements/run.lock pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -r requirements/run.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(COMPILE)
	touch $@

$(VENV)/.installed-test: requirements/test.lock pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -r requirements/test.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(COMPILE)
	touch $@ $(VENV)/.installed-run

run: $(VENV)/.installed-run
	$(BIN)/fabric sweep studies/default.yaml --out results/default --overwrite
	$(BIN)/fabric report results/default

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -n 2 --nbmake --doctest-modules fabric topologies solvers workloads cli tests notebooks

bench: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q -m bench -s tests/benchmarks

# Refresh the lock after changing dependencies in pyproject.toml (or to take new releases on purpose),
# then run `make clean test` and commit requirements/*.lock with the change.
lock:
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	.venv-lock/bin/uv pip compile pyproject.toml requirements/build.in --universal --python-version 3.10 \
	    --generate-hashes --no-header --annotation-style line -o requirements/run.lock
	.venv-lock/bin/uv pip compile pyproject.toml requirements/build.in --extra test --extra dask --universal \
	    --python-version 3.10 --generate-hashes --no-header --annotation-style line -o requirements/test.lock

# The suite on the newest releases pyproject.toml admits (a check before refreshing the lock; not CI's).
test-latest:
	rm -rf .venv-latest
	$(PYTHON) -m venv .venv-latest
	.venv-latest/bin/pip install --quiet --disable-pip-version-check --upgrade pip
	.venv-latest/bin/pip install --quiet --disable-pip-version-check --upgrade -e '.[test,dask]'
	.venv-latest/bin/pip freeze --exclude-editable > .venv-latest/versions.txt
	.venv-latest/bin/python -m pytest -q -n 2 --nbmake --doctest-modules fabric topologies solvers workloads cli tests notebooks

clean:
	rm -rf $(VENV) .venv-latest .venv-lock .pytest_cache
