# The two set-up commands of the README. Each creates .venv if needed and installs what it runs.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: demo test bench clean browser

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# The main job, offline: a whole rebuild on an embedded synthetic pool (no torch needed).
demo: $(PY)
	$(PIP) install -q -e ".[pipeline]"
	$(PY) -m pipeline demo

# The browser the page tests drive (Debian's chromium and its driver), installed when missing.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; }

# The test suite, with every extra installed (torch, timm, transformers, ray: what CI runs).
test: $(PY) browser
	$(PIP) install -q -e ".[all]"
	$(PY) -m pytest

bench: $(PY)
	$(PIP) install -q -e ".[all]"
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) demo-output hub .pytest_cache
