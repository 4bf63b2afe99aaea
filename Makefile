# The two commands of the README: `make demo` (the main job on the embedded default) and
# `make test` (brings the test lab up, then tests, lint and type checks).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test quick lab lab-down lint check

demo: $(STAMP)
	$(PYTHON) scripts/testlab.py up --engine-only
	DOCKER_HOST=unix://$(CURDIR)/.lab/docker/ctl/docker.sock $(BIN)/subrun hosts check
	DOCKER_HOST=unix://$(CURDIR)/.lab/docker/ctl/docker.sock $(BIN)/subrun run

# timing tests on h2's core; beside them on the other core the host-free tests, then the lab
# modules marked `beside`, and lint when idle; then the other lab tests in 3 workers
# (SUBRUN_TEST_WORKERS=N; scripts/suite.py)
test: $(STAMP) lab
	$(BIN)/python scripts/suite.py

# the loop while editing: no test lab, no root, under a minute
quick: $(STAMP)
	$(BIN)/pytest -q -m "not lab and not slow"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

lab:
	$(PYTHON) scripts/testlab.py up

lab-down:
	$(PYTHON) scripts/testlab.py down

$(STAMP): pyproject.toml
	$(PYTHON) scripts/venv.py $(VENV)
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)
