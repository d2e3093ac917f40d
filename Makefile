# Every target creates .venv when it is missing, so a fresh clone needs nothing
# installed by hand beyond a Python 3.11+ interpreter.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CODE := $(wildcard src tests examples benchmarks)

.PHONY: demo test lint format typecheck bench soak clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/document_review.py

lint: $(STAMP)
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format $(CODE)
	$(BIN)/ruff check --fix $(CODE)

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

soak: $(STAMP)
	$(BIN)/pytest -m soak --timeout 3600

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
