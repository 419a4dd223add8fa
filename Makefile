# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
DEMO_INDEX ?= .ragsieve-demo
DEMO_QUESTION ?= How do I rotate the API key of a Lumen workspace, and what happens to the old key?
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test install install-dev bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# The CPU wheel of torch goes in first: a bare `torch` requirement would pull a multi-GB CUDA build.
$(VENV)/.torch: | $(PY)
	$(PIP) install --quiet torch==2.13.0
	touch $@

$(VENV)/.installed: $(VENV)/.torch pyproject.toml
	$(PIP) install --quiet -e '.[local]'
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PIP) install --quiet -e '.[local,dev,milvus,fast,ray]'
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: $(VENV)/.installed
	$(VENV)/bin/ragsieve index examples/docs examples/code --index $(DEMO_INDEX)
	$(VENV)/bin/ragsieve ask "$(DEMO_QUESTION)" --index $(DEMO_INDEX)

test: $(VENV)/.installed-dev
	$(PY) -m pytest -q tests

bench: $(VENV)/.installed-dev
	$(PY) benchmarks/retrieval.py

clean:
	rm -rf $(VENV) $(DEMO_INDEX) build dist *.egg-info
