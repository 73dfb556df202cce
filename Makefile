# goldenset: `make run` serves the API with sample incidents; `make test` runs the whole suite.
# Both create .venv first if it is missing.

PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
# PyTorch is installed before anything that depends on it, so pip never picks a multi-GB CUDA
# build. Override for another platform, e.g. `make TORCH_SPEC='torch==2.9.1' test`.
TORCH_SPEC ?= torch==2.13.0
# Every database test runs once per backend listed here.
TEST_DATABASES ?= sqlite,postgresql
TEST_POSTGRES_URL ?= postgresql+psycopg://postgres@127.0.0.1:5432/test
HOST ?= 127.0.0.1
PORT ?= 8000
SAMPLE := samples/cisa_kev/known_exploited_vulnerabilities.sample.json
SAMPLE_MAPPING := examples/mappings/cisa_kev.yaml
SAMPLE_EVAL := examples/evals/cisa_kev_sample.yaml

.PHONY: setup run test lint typecheck unit clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(BIN)/python -m pip --version >/dev/null 2>&1 || { rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

run: setup
	$(BIN)/goldenset migrate
	$(BIN)/goldenset ingest $(SAMPLE) --source cisa-kev-sample --mapping $(SAMPLE_MAPPING)
	$(BIN)/goldenset eval create --file $(SAMPLE_EVAL) --exist-ok
	$(BIN)/goldenset refresh --eval cisa-kev-sample
	@echo
	@echo "goldenset is starting on http://$(HOST):$(PORT) (API docs at /docs)."
	@echo "Get a token in another terminal with:"
	@echo "    $(BIN)/goldenset token create --name me --scopes read,ingest"
	@echo "then: curl -H \"Authorization: Bearer <token>\" http://$(HOST):$(PORT)/v1/items"
	@echo " and: curl -H \"Authorization: Bearer <token>\" http://$(HOST):$(PORT)/v1/evals/cisa-kev-sample/releases/latest"
	@echo
	$(BIN)/goldenset serve --host $(HOST) --port $(PORT)

lint: setup
	$(BIN)/ruff check .

typecheck: setup
	$(BIN)/mypy

test: setup lint typecheck
	GOLDENSET_TEST_DATABASES=$(TEST_DATABASES) GOLDENSET_TEST_POSTGRES_URL=$(TEST_POSTGRES_URL) $(BIN)/pytest

unit: setup
	GOLDENSET_TEST_DATABASES=sqlite $(BIN)/pytest tests/unit

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache *.egg-info
