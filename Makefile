# pdanet: `make demo` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast setup graphviz lint bench acceptance clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

graphviz:
	@if command -v dot >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Graphviz (dot) with apt-get"; \
		(apt-get install -y -q graphviz >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q graphviz >/dev/null)); \
	else \
		echo "Graphviz 'dot' is missing: install it (e.g. 'sudo apt-get install graphviz'); rendering tests will be skipped."; \
	fi

setup: $(STAMP) graphviz

demo: setup
	$(PY) -m pdanet.demo

test: setup
	$(PY) -m pytest -q -n 2 --nbmake tests notebooks

test-fast: setup
	$(PY) -m pytest -q -n 2 -m "not slow" tests

lint: setup
	$(VENV)/bin/ruff check pdanet tests

bench: setup
	for f in benchmarks/bench_*.py; do $(PY) $$f; done

acceptance: setup
	$(PY) benchmarks/acceptance.py

clean:
	rm -rf $(VENV) out .pytest_cache
