# The two commands of the README: `make demo` and `make test`. Both set up .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CONFORMANCE ?= ../shared/conformance

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/reversi demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest tests -q -n 2
	$(BIN)/python -m pytest $(CONFORMANCE) -q -n 2

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .reversi build *.egg-info
