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
# pytest-xdist worker processes for `make test` (every test has its own databases and folders).
TEST_WORKERS ?= 2
HOST ?= 127.0.0.1
PORT ?= 8000
SAMPLE := samples/cisa_kev/known_exploited_vulnerabilities.sample.json
SAMPLE_MAPPING := examples/mappings/cisa_kev.yaml
SAMPLE_EVAL := examples/evals/cisa_kev_sample.yaml

.PHONY: setup browser run test test-fast lint typecheck unit clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml
	$(BIN)/python -m pip --version >/dev/null 2>&1 || { rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ./clients/python -e '.[dev]'
	@# The default (auto) embedding backend: openvino and openvino-int8 exported once from the bundled
	@# weights (offline) and timed on this machine; the faster is recorded and used.
	HF_HUB_OFFLINE=1 $(BIN)/python -c "from embedding.backend_choice import machine_choice; print('embedding backend on this machine:', machine_choice())"
	touch $@

# The web UI tests drive Debian's Chromium through Playwright (Playwright's own browser download
# is not used). Installed here when missing and running as root; otherwise says how.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the web UI tests"; \
	    apt-get install -y -q chromium >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; \
	  else \
	    echo "the web UI tests need Chromium: run 'sudo apt-get install chromium' (or put chromium on PATH)" >&2; exit 1; \
	  fi; }

run: setup
	$(BIN)/goldenset migrate
	$(BIN)/goldenset ingest $(SAMPLE) --source cisa-kev-sample --mapping $(SAMPLE_MAPPING)
	$(BIN)/goldenset eval create --file $(SAMPLE_EVAL) --exist-ok
	$(BIN)/goldenset refresh --eval cisa-kev-sample
	@echo
	@echo "goldenset is starting on http://$(HOST):$(PORT): the web UI is at /ui, the API docs at /docs."
	@echo "Get a token in another terminal with:"
	@echo "    $(BIN)/goldenset token create --name me --scopes read,curate"
	@echo "then sign in at http://$(HOST):$(PORT)/ui/login with it, or call the API:"
	@echo "    curl -H \"Authorization: Bearer <token>\" http://$(HOST):$(PORT)/v1/evals/cisa-kev-sample/releases/latest"
	@echo
	$(BIN)/goldenset serve --host $(HOST) --port $(PORT)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache

typecheck: setup
	$(BIN)/mypy

test: setup browser lint typecheck
	GOLDENSET_TEST_DATABASES=$(TEST_DATABASES) GOLDENSET_TEST_POSTGRES_URL=$(TEST_POSTGRES_URL) $(BIN)/pytest -n $(TEST_WORKERS)

# The fast tier, for the edit-test loop: unit and integration tests on SQLite (no server process,
# browser or PostgreSQL). `make test` remains the whole suite.
test-fast: setup lint
	GOLDENSET_TEST_DATABASES=sqlite $(BIN)/pytest -n $(TEST_WORKERS) tests/unit tests/integration

unit: setup
	GOLDENSET_TEST_DATABASES=sqlite $(BIN)/pytest tests/unit

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache *.egg-info
