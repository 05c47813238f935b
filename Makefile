# The two set-up commands of the README: `make demo` and `make test`.
# Each builds its own virtualenv (.venv) and installs what it needs.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit-checks pytest bench clean system-deps

$(STAMP): pyproject.toml scripts/bootstrap-venv
	PYTHON="$(PYTHON)" scripts/bootstrap-venv $(VENV)
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/paigow-controller simulate --rounds 12 --faults default --web-display --state-dir demo-state \
		--config hw/config.demo.toml

test: $(STAMP) system-deps lint typecheck unit-checks pytest

system-deps:
	scripts/install-system-deps

lint: $(STAMP) system-deps
	$(BIN)/ruff check controller drivers tests bench
	$(BIN)/ruff format --check controller drivers tests bench
	shellcheck scripts/* hw/*.sh hw/kiosk/*.sh bench/*.sh

typecheck: $(STAMP)
	$(BIN)/mypy --strict controller drivers

unit-checks: $(STAMP)
	scripts/check-systemd-unit

# In parallel (pytest-xdist): 2 workers per core, the slow tests first (tests/conftest.py).
# Bytecode is cached even where the environment says PYTHONDONTWRITEBYTECODE: else every
# worker rewrites every test module's asserts again and each of the suite's hundreds of
# `python -m controller` runs compiles the package again (0.19 s of CPU a run, 0.12 cached).
pytest: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -n auto --dist load --maxschedchunk 1

# Every bench/bench_*.py, each printing its figures with the goal and PASS or MISS beside them
# (a MISS is a figure, not a failure); a script that fails is named at the end, after the rest.
# The first run builds a log of 400,000 rounds (about six minutes; BENCH_ROUNDS for less).
bench: $(STAMP)
	@failed=""; for f in bench/bench_*.py; do \
		echo "== $$f"; $(BIN)/python $$f || failed="$$failed $$f"; \
	done; \
	if [ -n "$$failed" ]; then echo "failed:$$failed"; exit 1; fi

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
