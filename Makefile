# Set-up and the two jobs of the README. Override the torch pin with `make demo TORCH=torch==X`.
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test install install-test sandbox clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip

# torch is installed first, on its own, so that the pin decides which build is used
# (a CPU wheel here) before any other package can ask for a CUDA one.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install "$(TORCH)"
	$(BIN)/pip install -e .
	touch $@

# The ray extra too, so that the Ray executor's tests run in CI.
$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install -e ".[test,ray]"
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# Submitted measures run in a bubblewrap sandbox (`genbench submit` refuses to run them without one unless told
# --unsandboxed): Debian's bubblewrap, installed with apt-get when bwrap is missing, as .ci/run installs chromium.
sandbox:
	@command -v bwrap >/dev/null || { \
	  SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
	  if command -v apt-get >/dev/null; then \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends bubblewrap; \
	  else echo "bwrap is missing and there is no apt-get: install bubblewrap with your package manager"; fi; }

demo: install
	$(BIN)/genbench zoo build mnist1d-demogen
	$(BIN)/genbench evaluate '*' --zoo mnist1d-demogen
	$(BIN)/genbench leaderboard --format table --html leaderboard/site

test: install-test sandbox
	$(BIN)/python -m pytest -q tests

clean:
	rm -rf $(VENV)
