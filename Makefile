# Two entry points for a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean browser validate ns3

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# PyTorch CPU first, pinned: this machine has the 2.13.0 CPU wheel on disk; an unpinned torch
	# (what the rl extra's range would pull) is a multi-GB CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/flowherd demo

# Debian's Chromium, for the test that renders the HTML report headless.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing: sudo apt-get install chromium (the HTML report test needs it)"; fi; }

test: $(STAMP) browser
	$(BIN)/ruff check .
	$(BIN)/pytest -q

# flowherd's congestion model against ns-3 (validation/README.md; not part of `make test`).
ns3:
	@pkg-config --exists ns3-core ns3-internet ns3-traffic-control 2>/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libns3-dev libgsl-dev >/dev/null; \
	  else echo "ns-3 is missing: sudo apt-get install libns3-dev libgsl-dev"; exit 1; fi; }

validate: $(STAMP) ns3
	$(BIN)/python validation/run.py

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
