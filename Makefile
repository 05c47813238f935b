# The two set-up commands of the README: `make demo` and `make test`.
# Both fill one virtualenv (.venv) from the lock files in requirements/ (pip --require-hashes),
# then install the project itself, editable, with --no-deps: `make demo` the runtime lock only
# (stamp .venv/.installed-runtime), `make test` the test tools' lock on top (.venv/.installed-test).
# `make lock` writes the lock files again (uv pip compile, from pyproject.toml).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
RUNTIME_STAMP := $(VENV)/.installed-runtime
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo test lint typecheck unit-checks pytest systemtest armtest bench clean system-deps lock

$(RUNTIME_STAMP): pyproject.toml requirements/runtime.txt scripts/bootstrap-venv
	PYTHON="$(PYTHON)" scripts/bootstrap-venv $(VENV) requirements/runtime.txt
	touch $@

# test.txt holds the runtime pins too (compiled with -c runtime.txt: the same versions and hashes)
$(TEST_STAMP): $(RUNTIME_STAMP) requirements/test.txt
	PYTHON="$(PYTHON)" scripts/bootstrap-venv $(VENV) requirements/test.txt
	touch $@

demo: $(RUNTIME_STAMP)
	$(BIN)/paigow-controller simulate --rounds 12 --faults default --web-display --state-dir demo-state \
		--config hw/config.demo.toml

test: $(TEST_STAMP) system-deps lint typecheck unit-checks pytest systemtest armtest

system-deps:
	scripts/install-system-deps

lint: $(TEST_STAMP) system-deps
	$(BIN)/ruff check controller drivers tests bench
	$(BIN)/ruff format --check controller drivers tests bench
	shellcheck scripts/* hw/*.sh hw/kiosk/*.sh hw/kiosk/kiosk-session bench/*.sh

typecheck: $(TEST_STAMP)
	$(BIN)/mypy --strict controller drivers

unit-checks: $(RUNTIME_STAMP)
	scripts/check-systemd-unit

# In parallel (pytest-xdist): 2 workers per core, the slow tests first (tests/conftest.py).
# Bytecode is cached even where the environment says PYTHONDONTWRITEBYTECODE: else every
# worker rewrites every test module's asserts again and each of the suite's hundreds of
# `python -m controller` runs compiles the package again (0.19 s of CPU a run, 0.12 cached).
pytest: $(TEST_STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -n auto --dist load --maxschedchunk 1 \
		--ignore=tests/system --ignore=tests/arm64

# The shipped unit and installer under a real systemd: Debian bookworm booted in
# systemd-nspawn (tests/system; as root, about two minutes, the first run on a host one more
# for debootstrap). After the suite, alone: it waits on real timers (the watchdog's 10 s).
systemtest: $(TEST_STAMP) system-deps
	$(BIN)/pytest -p no:xdist -p no:cacheprovider tests/system -v

# The Pi's architecture: Debian bookworm arm64 run here through qemu-user-static and binfmt_misc
# (tests/arm64; as root), the runtime lock and the project installed in it, plays plain rounds
# that verify-log passes, with the same results as here for the same seed. The first run on a
# host debootstraps the tree (kept in /var/tmp/paigow-arm64); where arm64 binaries cannot run
# (not root, no binfmt_misc, no qemu) it is skipped, with the reason on one line.
# `make armtest ARM64_SUITE=1` also runs a part of the suite there (tests/core, tests/drivers:
# about three minutes more the first time, so not in `make test`).
armtest: $(TEST_STAMP) system-deps
	$(BIN)/pytest -p no:xdist -p no:cacheprovider tests/arm64 -v -s

# Every bench/bench_*.py, each printing its figures with the goal and PASS or MISS beside them
# (a MISS is a figure, not a failure); a script that fails is named at the end, after the rest.
# The first run builds a log of 400,000 rounds (about six minutes; BENCH_ROUNDS for less).
# bench_pi.py runs the same commands in the arm64 tree too (as root, after `make armtest`;
# else it says why in one line and prints the x86_64 figures); bench_bytecode.py's first run
# installs the runtime lock in a virtualenv of its own (bench/.scratch/install-venv).
bench: $(RUNTIME_STAMP)
	@failed=""; for f in bench/bench_*.py; do \
		echo "== $$f"; $(BIN)/python $$f || failed="$$failed $$f"; \
	done; \
	if [ -n "$$failed" ]; then echo "failed:$$failed"; exit 1; fi

clean:
	rm -rf $(VENV) $(LOCK_VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info

# The lock files, for CPython 3.11 on any platform (a universal resolution: the same pins for
# CI's x86_64 and the Pi's aarch64, with the hashes of every wheel and sdist of each pinned
# version). The pins in the files are kept unless pyproject.toml asks otherwise; to move them:
#   make lock LOCK_ARGS=--upgrade                          (all)
#   make lock LOCK_ARGS='--upgrade-package cryptography'   (one)
LOCK_VENV := .venv-lock
LOCK_ARGS ?=
UV_COMPILE = $(LOCK_VENV)/bin/uv pip compile --universal --python-version 3.11 --generate-hashes \
	--custom-compile-command "make lock" $(LOCK_ARGS)
# pip does not widen a manylinux tag to older ones: name each glibc up to bookworm's 2.36
PI_PLATFORMS := $(foreach v,$(shell seq 17 36),--platform manylinux_2_$(v)_aarch64)

$(LOCK_VENV)/.installed: requirements/uv.txt
	"$(PYTHON)" -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --require-hashes -r requirements/uv.txt
	touch $@

lock: $(LOCK_VENV)/.installed
	$(UV_COMPILE) requirements/uv.in -o requirements/uv.txt
	$(UV_COMPILE) pyproject.toml requirements/build.in -o requirements/runtime.txt
	$(UV_COMPILE) pyproject.toml --extra test -c requirements/runtime.txt -o requirements/test.txt
	@echo "== the Pi (aarch64, glibc 2.36): a wheel for every runtime pin, its hash in the lock"
	rm -rf $(LOCK_VENV)/aarch64
	$(LOCK_VENV)/bin/python -m pip download --require-hashes --no-deps --only-binary=:all: \
		--implementation cp --python-version 3.11 --abi cp311 $(PI_PLATFORMS) \
		-r requirements/runtime.txt -d $(LOCK_VENV)/aarch64
