# Two entry points for a fresh machine: `make demo` and `make test` (README, "Two commands").
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo demo-full test test-all lint bench startup docs browser clean validate ns3 aot

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# PyTorch CPU first, pinned: this machine has the 2.13.0 CPU wheel on disk; an unpinned torch
	# (what the rl extra's range would pull) is a multi-GB CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

# The quick demo, budgeted at 5 minutes of wall time on 2 quiet cores (it prints the CPU time its
# simulations took; README, "What the demo shows").
demo: $(STAMP) aot
	$(BIN)/flowherd demo

# Every literature baseline and every flowherd policy: several times as long (CASSINI and Crux
# cost 7-10 runs without control each).
demo-full: $(STAMP)
	$(BIN)/flowherd demo --full

# Debian's Chromium, for the one test that renders the HTML report headless (skipped without it
# outside CI). Installed here, never by a test; as root it runs apt-get (about 5 minutes, 300 MB).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian's chromium for the HTML report test (apt-get, a few minutes)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing: sudo apt-get install chromium (the HTML report test needs it)"; fi; }

# The engine's kernels compiled ahead of time (flowherd.engine.aot: a collective then starts without
# numba). The install builds them; after an edit of a kernel module this rebuilds them (about a
# minute of CPU); until then the kernels fall back to numba's JIT, same numbers, slower start.
aot: $(STAMP)
	$(BIN)/python -m flowherd.engine.aot_build --if-stale

lint: $(STAMP)
	$(BIN)/ruff check .

# ruff, then every test but the long validations (marker `slow`), one pytest-xdist worker per
# core, a test file's tests on one worker (its module fixtures built once): 5-9 minutes on 2 cores.
test: $(STAMP) aot browser lint
	FLOWHERD_REQUIRE_AOT=1 $(BIN)/pytest -q -m "not slow" -n auto --dist loadfile

# Everything, the slow validations (the full demo on the embedded default, large fabrics,
# SIGKILL-and-resume sweeps) included: about 20 minutes on 2 cores.
test-all: $(STAMP) aot browser lint
	FLOWHERD_REQUIRE_AOT=1 $(BIN)/pytest -q

# flowherd's congestion model against ns-3 (validation/README.md; not part of `make test`).
ns3:
	@pkg-config --exists ns3-core ns3-internet ns3-traffic-control 2>/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libns3-dev libgsl-dev >/dev/null; \
	  else echo "ns-3 is missing: sudo apt-get install libns3-dev libgsl-dev"; exit 1; fi; }

# lossy model against mainline ns-3, then the lossless one against the RDMA fork (HPCC_NS3: its
# simulation/ directory, built as validation/README.md "Lossless" says)
validate: $(STAMP) ns3
	$(BIN)/python validation/run.py
	$(BIN)/python validation/run_roce.py

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py

# Start-up and run times against the README's budgets (--with-make adds `make demo` and `make test`).
startup: $(STAMP) aot
	$(BIN)/python benchmarks/startup.py

# Regenerate docs/scenario-schema.md from the pydantic models (a test checks it is current).
docs: $(STAMP)
	$(BIN)/python docs/generate_schema.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
