# Quick start: `make plan` (offline plan of the default stack) and `make test` (lint, then the suite); `make doctor STACK=NAME` before `pulumi up`.
# `make docs` and `make golden` regenerate the generated reference and the golden plans.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STACK ?= dev
# e.g. PLAN_FLAGS=--assume-secrets for a stack whose job needs a secret not set yet
PLAN_FLAGS ?=

.PHONY: plan doctor lint format test soak mutants docs golden clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

# Test-only packages on top of the runtime ones.
$(VENV)/.installed-test: $(VENV)/.installed requirements-test.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	touch $@

plan: $(VENV)/.installed
	$(PY) -m infra.plan --stack $(STACK) $(PLAN_FLAGS)

# Read-only preflight of the stack's project (Application Default Credentials): docs/doctor.md.
doctor: $(VENV)/.installed
	$(PY) -m tools.doctor --stack $(STACK)

# Lint and format check (ruff; settings in pyproject.toml); `make test` runs it first.
lint: $(VENV)/.installed-test
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# Rewrites the tree in ruff's format and applies ruff's safe fixes; review the diff.
format: $(VENV)/.installed-test
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

# Three xdist workers on two cores: a Ray test waits on job starts part of the time, and a third worker
# fills those gaps; tests/conftest.py deals the Ray tests to two of them, so two Ray heads (docs/testing.md). Bytecode is written even where PYTHONDONTWRITEBYTECODE is
# set: each worker, each Ray worker process and each CLI subprocess would otherwise compile the tree again.
test: lint
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 3 --dist worksteal

# Fault-injection soak of the run's owner (docs/testing.md): 300 faults, a few on a private local Ray head.
SEED ?= 1
soak: $(VENV)/.installed
	$(PY) -m tests.soak --faults 300 --seed $(SEED)

# Mutation testing (docs/testing.md); not part of CI. MUTATE="infra/naming tools/doctor/quota_checks" picks modules.
MUTATE ?=
mutants: $(VENV)/.installed-test
	$(PY) -m tests.mutants $(MUTATE)

docs: $(VENV)/.installed
	$(PY) -m tools.reference_docs --write

golden: $(VENV)/.installed
	$(PY) -m tools.golden_plans

clean:
	rm -rf $(VENV)
