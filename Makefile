# The two commands a new user needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck unit integration chaos bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/webhook-service up

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict webhook_service signer workers

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit -q -p no:cacheprovider

integration: $(STAMP)
	$(BIN)/python -m pytest tests/integration -q -p no:cacheprovider

chaos: $(STAMP)
	$(BIN)/python -m pytest tests/chaos -q -p no:cacheprovider

# pytest exits 5 when it collected no test: that is a failure here, never a pass.
test: lint typecheck
	$(BIN)/python -m pytest tests -q -p no:cacheprovider -ra

bench: $(STAMP)
	$(BIN)/python bench/bench_signer.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .hypothesis
