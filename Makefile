# Quick start: `make plan` (offline plan of the default stack) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STACK ?= dev

.PHONY: plan test docs clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

plan: $(VENV)/.installed
	$(PY) -m infra.plan --stack $(STACK)

test: $(VENV)/.installed
	$(PY) -m pytest -q

docs: $(VENV)/.installed
	$(PY) -m infra.docs --write

clean:
	rm -rf $(VENV)
